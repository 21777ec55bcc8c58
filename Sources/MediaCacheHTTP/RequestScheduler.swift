import Foundation
import Synchronization

/// Who is waiting for a read: a player (foreground) or work nobody is watching yet (background).
public enum ReadPriority: Sendable, Equatable {
  /// A player or an app is waiting for these bytes now (a proxy client, `CachingReader.read`). Never waits for a
  /// request slot held by another object's reader or by background work (unless
  /// `CachingReader.Configuration.maxForegroundRequests` is set).
  case foreground
  /// Prefetch, `fetch --hls`, preloading: limited per origin host and yields to foreground reads.
  case background
}

/// Decides when an origin request may start ("playback first").
///
/// Foreground requests start at once unless the optional process-wide cap `maxForeground` is reached. Background
/// requests are limited to `maxBackgroundPerHost` per origin host, and a background request for a host does not
/// start while a foreground request for that host is waiting to start. A background request still waiting is
/// promoted (`promote(_:)`) as soon as a foreground reader needs its bytes, so joining it never makes a player
/// wait behind background work.
actor RequestScheduler {
  let maxForeground: Int?
  let maxBackgroundPerHost: Int

  /// Connections per host the HTTP client may open: above any count the scheduler lets run at once (foreground
  /// requests are unlimited by default), so the client's pool never queues a request the scheduler started.
  /// The process's file-descriptor limit is the real bound.
  static let connectionPoolLimit = 65_536

  /// The scheduler shared by every `CachingReader` in the process with the same limits: the limits are per
  /// process (and per host), not per reader.
  static func shared(maxForeground: Int?, maxBackgroundPerHost: Int) -> RequestScheduler {
    let key = Key(maxForeground: maxForeground, maxBackgroundPerHost: maxBackgroundPerHost)
    return registry.withLock { schedulers in
      if let existing = schedulers[key] { return existing }
      let scheduler = RequestScheduler(
        maxForeground: maxForeground, maxBackgroundPerHost: maxBackgroundPerHost)
      schedulers[key] = scheduler
      return scheduler
    }
  }

  private struct Key: Hashable {
    var maxForeground: Int?
    var maxBackgroundPerHost: Int
  }
  private static let registry = Mutex<[Key: RequestScheduler]>([:])

  private struct Waiter {
    var id: Int
    var host: String
    var continuation: CheckedContinuation<ReadPriority?, Never>
  }

  private var foregroundRunning = 0
  private var backgroundRunning: [String: Int] = [:]
  private var foregroundWaiting: [Waiter] = []
  private var backgroundWaiting: [Waiter] = []
  /// Requests promoted before they asked for a slot (their flight was promoted while its task was starting).
  private var promotedEarly: Set<Int> = []

  init(maxForeground: Int?, maxBackgroundPerHost: Int) {
    self.maxForeground = maxForeground.map { max(1, $0) }
    self.maxBackgroundPerHost = max(1, maxBackgroundPerHost)
  }

  /// Requests running now: foreground, and background per host (for tests and metrics).
  var running: (foreground: Int, background: [String: Int]) { (foregroundRunning, backgroundRunning) }

  /// Requests waiting for a slot now, by the class they wait for (for tests and metrics).
  var waiting: (foreground: Int, background: Int) { (foregroundWaiting.count, backgroundWaiting.count) }

  /// Takes a slot for request `id` (unique per flight) to `host`, waiting if its class is at its limit. Returns
  /// the class of the slot granted (a background request promoted while waiting gets a foreground slot), to be
  /// given back to `release`. A task cancelled while waiting throws CancellationError without a slot.
  func acquire(id: Int, host: String, priority: ReadPriority) async throws -> ReadPriority {
    let priority = promotedEarly.remove(id) != nil ? .foreground : priority
    switch priority {
    case .foreground where foregroundHasRoom:
      foregroundRunning += 1
      return .foreground
    case .background where backgroundMayStart(host):
      backgroundRunning[host, default: 0] += 1
      return .background
    default: break
    }
    let granted: ReadPriority? = await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<ReadPriority?, Never>) in
        if Task.isCancelled {
          continuation.resume(returning: nil)
        } else if priority == .foreground {
          foregroundWaiting.append(Waiter(id: id, host: host, continuation: continuation))
        } else {
          backgroundWaiting.append(Waiter(id: id, host: host, continuation: continuation))
        }
      }
    } onCancel: {
      Task { await self.withdraw(id) }
    }
    guard let granted else { throw CancellationError() }
    return granted
  }

  /// A foreground reader needs the bytes of request `id`: if it waits for a background slot it now waits for
  /// (or takes) a foreground one. A request already running keeps the slot it has.
  func promote(_ id: Int) {
    guard let index = backgroundWaiting.firstIndex(where: { $0.id == id }) else {
      if !foregroundWaiting.contains(where: { $0.id == id }) { promotedEarly.insert(id) }
      return
    }
    let waiter = backgroundWaiting.remove(at: index)
    if foregroundHasRoom {
      foregroundRunning += 1
      waiter.continuation.resume(returning: .foreground)
    } else {
      foregroundWaiting.append(waiter)
    }
  }

  /// Gives back the slot `acquire` granted to request `id`.
  func release(id: Int, host: String, slot: ReadPriority) {
    promotedEarly.remove(id)
    switch slot {
    case .foreground:
      foregroundRunning -= 1
      if !foregroundWaiting.isEmpty, foregroundHasRoom {
        foregroundRunning += 1
        foregroundWaiting.removeFirst().continuation.resume(returning: .foreground)
      }
    case .background:
      backgroundRunning[host, default: 1] -= 1
      if backgroundRunning[host] == 0 { backgroundRunning[host] = nil }
    }
    startBackground()
  }

  private var foregroundHasRoom: Bool { maxForeground.map { foregroundRunning < $0 } ?? true }

  private func backgroundMayStart(_ host: String) -> Bool {
    (backgroundRunning[host] ?? 0) < maxBackgroundPerHost && !foregroundWaiting.contains { $0.host == host }
  }

  /// Starts the waiting background requests that may start now, oldest first.
  private func startBackground() {
    var index = 0
    while index < backgroundWaiting.count {
      let host = backgroundWaiting[index].host
      if backgroundMayStart(host) {
        backgroundRunning[host, default: 0] += 1
        backgroundWaiting.remove(at: index).continuation.resume(returning: .background)
      } else {
        index += 1
      }
    }
  }

  private func withdraw(_ id: Int) {
    if let index = foregroundWaiting.firstIndex(where: { $0.id == id }) {
      foregroundWaiting.remove(at: index).continuation.resume(returning: nil)
      startBackground()  // a foreground waiter for this host no longer holds background work back
    } else if let index = backgroundWaiting.firstIndex(where: { $0.id == id }) {
      backgroundWaiting.remove(at: index).continuation.resume(returning: nil)
    }
    promotedEarly.remove(id)
  }

  /// The key requests are limited by: the origin's host and port.
  static func hostKey(of url: String) -> String {
    guard let components = URLComponents(string: url), let host = components.host else { return url }
    return components.port.map { "\(host):\($0)" } ?? host
  }
}
