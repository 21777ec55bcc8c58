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
///
/// A class over a `Mutex`, not an actor: a slot that is free is taken without suspending (`tryAcquire`), so a
/// new flight's first request can be sent by the reader that made it, with no hop onto another thread first;
/// waiters are resumed outside the lock.
final class RequestScheduler: Sendable {
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

  private struct State {
    var foregroundRunning = 0
    var backgroundRunning: [String: Int] = [:]
    var foregroundWaiting: [Waiter] = []
    var backgroundWaiting: [Waiter] = []
    /// Requests promoted before they asked for a slot (their flight was promoted while its task was starting).
    var promotedEarly: Set<Int> = []
  }
  private let state = Mutex(State())

  init(maxForeground: Int?, maxBackgroundPerHost: Int) {
    self.maxForeground = maxForeground.map { max(1, $0) }
    self.maxBackgroundPerHost = max(1, maxBackgroundPerHost)
  }

  /// Requests running now: foreground ones, and background ones per host.
  var running: (foreground: Int, background: [String: Int]) {
    state.withLock { ($0.foregroundRunning, $0.backgroundRunning) }
  }

  /// Requests waiting for a slot now.
  var waiting: (foreground: Int, background: Int) {
    state.withLock { ($0.foregroundWaiting.count, $0.backgroundWaiting.count) }
  }

  /// A slot for request `id` to `host` if one is free now (the kind of slot granted: a promoted request gets a
  /// foreground one), nil if the request would have to wait. The slot is given back with
  /// `release(id:host:slot:)`.
  func tryAcquire(id: Int, host: String, priority: ReadPriority) -> ReadPriority? {
    state.withLock { state in
      let priority = state.promotedEarly.contains(id) ? .foreground : priority
      guard let slot = take(priority, host: host, in: &state) else { return nil }
      state.promotedEarly.remove(id)
      return slot
    }
  }

  /// Waits for a slot for request `id` to `host`: the kind granted (a promoted request gets a foreground
  /// one). A task cancelled while waiting throws CancellationError without a slot.
  func acquire(id: Int, host: String, priority: ReadPriority) async throws -> ReadPriority {
    if let slot = tryAcquire(id: id, host: host, priority: priority) { return slot }
    let granted: ReadPriority? = await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<ReadPriority?, Never>) in
        let now: ReadPriority?? = state.withLock { state in
          if Task.isCancelled { return .some(nil) }
          let priority = state.promotedEarly.remove(id) != nil ? .foreground : priority
          // A slot may have been released between the first look and now.
          if let slot = take(priority, host: host, in: &state) { return .some(slot) }
          let waiter = Waiter(id: id, host: host, continuation: continuation)
          if priority == .foreground {
            state.foregroundWaiting.append(waiter)
          } else {
            state.backgroundWaiting.append(waiter)
          }
          return nil
        }
        if let now { continuation.resume(returning: now) }
      }
    } onCancel: {
      withdraw(id)
    }
    guard let granted else { throw CancellationError() }
    return granted
  }

  /// A foreground reader needs the bytes of request `id`: if it waits for a background slot, it now waits for
  /// (or takes) a foreground one; if it has not asked yet, it will get a foreground slot when it does.
  func promote(_ id: Int) {
    let granted = state.withLock { state -> Waiter? in
      guard let index = state.backgroundWaiting.firstIndex(where: { $0.id == id }) else {
        if !state.foregroundWaiting.contains(where: { $0.id == id }) { state.promotedEarly.insert(id) }
        return nil
      }
      let waiter = state.backgroundWaiting.remove(at: index)
      if hasForegroundRoom(state) {
        state.foregroundRunning += 1
        return waiter
      }
      state.foregroundWaiting.append(waiter)
      return nil
    }
    granted?.continuation.resume(returning: .foreground)
  }

  /// Request `id` ended: its slot goes to the next waiter that may start.
  func release(id: Int, host: String, slot: ReadPriority) {
    let granted = state.withLock { state -> [(Waiter, ReadPriority)] in
      state.promotedEarly.remove(id)
      var granted: [(Waiter, ReadPriority)] = []
      switch slot {
      case .foreground:
        state.foregroundRunning -= 1
        if !state.foregroundWaiting.isEmpty, hasForegroundRoom(state) {
          state.foregroundRunning += 1
          granted.append((state.foregroundWaiting.removeFirst(), .foreground))
        }
      case .background:
        state.backgroundRunning[host, default: 1] -= 1
        if state.backgroundRunning[host] == 0 { state.backgroundRunning[host] = nil }
      }
      granted += startBackground(&state)
      return granted
    }
    for (waiter, slot) in granted { waiter.continuation.resume(returning: slot) }
  }

  /// Takes a slot of kind `priority` for `host` if one is free.
  private func take(_ priority: ReadPriority, host: String, in state: inout State) -> ReadPriority? {
    switch priority {
    case .foreground where hasForegroundRoom(state):
      state.foregroundRunning += 1
      return .foreground
    case .background where backgroundMayStart(host, state):
      state.backgroundRunning[host, default: 0] += 1
      return .background
    default: return nil
    }
  }

  private func hasForegroundRoom(_ state: State) -> Bool {
    maxForeground.map { state.foregroundRunning < $0 } ?? true
  }

  private func backgroundMayStart(_ host: String, _ state: State) -> Bool {
    (state.backgroundRunning[host] ?? 0) < maxBackgroundPerHost
      && !state.foregroundWaiting.contains { $0.host == host }
  }

  /// Background waiters that may start now, their slots taken (resumed by the caller, outside the lock).
  private func startBackground(_ state: inout State) -> [(Waiter, ReadPriority)] {
    var started: [(Waiter, ReadPriority)] = []
    var index = 0
    while index < state.backgroundWaiting.count {
      let host = state.backgroundWaiting[index].host
      if backgroundMayStart(host, state) {
        state.backgroundRunning[host, default: 0] += 1
        started.append((state.backgroundWaiting.remove(at: index), .background))
      } else {
        index += 1
      }
    }
    return started
  }

  private func withdraw(_ id: Int) {
    let withdrawn = state.withLock { state -> [(Waiter, ReadPriority?)] in
      defer { state.promotedEarly.remove(id) }
      if let index = state.foregroundWaiting.firstIndex(where: { $0.id == id }) {
        let waiter = state.foregroundWaiting.remove(at: index)
        // A foreground waiter for this host no longer holds background work back.
        return [(waiter, nil)] + startBackground(&state).map { ($0.0, $0.1) }
      }
      if let index = state.backgroundWaiting.firstIndex(where: { $0.id == id }) {
        return [(state.backgroundWaiting.remove(at: index), nil)]
      }
      return []
    }
    for (waiter, slot) in withdrawn { waiter.continuation.resume(returning: slot) }
  }

  /// The key requests are limited by: the origin's host and port.
  static func hostKey(of url: String) -> String {
    guard let components = URLComponents(string: url), let host = components.host else { return url }
    return components.port.map { "\(host):\($0)" } ?? host
  }
}
