import Foundation
import Logging
import MediaCache
import Synchronization

/// What an `ObjectSession` needs from the `CachingReader` that opened it, handed over instead of the reader:
/// the cache, the origin client, the request scheduler, the registry of open sessions and the limits of its
/// flights.
struct SessionEnvironment: Sendable {
  let cache: MediaCache
  let client: OriginClient
  let scheduler: RequestScheduler
  let registry: SessionRegistry
  /// Retries after a connection error, a 5xx or a cut-off body.
  let maxRetries: Int
  /// First backoff; doubled per retry, plus up to 50% jitter.
  let retryBaseDelay: Duration
  /// See `CachingReader.Configuration.abandonedRequestReadAhead`.
  let abandonedRequestReadAhead: Int64
  /// See `CachingReader.Configuration.abandonedRequestGrace`.
  let abandonedRequestGrace: Duration
  /// See `CachingReader.Configuration.originRequestWindow`.
  let originRequestWindow: Int64
  /// Where work nobody waits for is logged: retries, and commits that fail when an object closes.
  let logger: Logger
  /// Bytes read from the cache that all reads may hold at once (`CachingReader.Configuration.cacheReadBudget`).
  let readBudget: ReadBudget
  /// The buffers pieces from the cache are read into.
  let bufferPool: ByteBufferPool
  /// See `CachingReader.Configuration.backgroundBytesPerSecond` (nil: no limit).
  let backgroundRate: BackgroundRateLimit?
  /// The reader's players waiting for an origin (`CachingReader.playersWaitingForOrigin`).
  let playerWaits = PlayerWaits()
  /// Origins a revalidation lately failed to reach: stale copies of theirs are served without asking again.
  let outages = OriginOutages()
  /// Whether a response's first bytes may be handed over while they are written (`BodyWriter`).
  let earlyHandOver = EarlyHandOver()
}

/// The objects a `CachingReader` has open: one `ObjectSession` per object (one data manager, so completed
/// chunks are visible to every reader at once), counted by the reads that have it open and the flights still
/// running on it, and closed (committing) on the I/O executor when both are done.
final class SessionRegistry: Sendable {
  let cache: MediaCache

  private struct Sessions {
    /// Per object: its session, the reads that have it open, and the flights still running on it.
    var open: [ObjectID: (session: ObjectSession, users: Int, flights: Int)] = [:]
    /// Objects whose last session is closing (its data manager committing what it completed), with the reads
    /// waiting to open a new one: a manager opened before that commit would read the older manifest and fetch
    /// again chunks this process has just fetched.
    var closing: [ObjectID: [CheckedContinuation<Void, Never>]] = [:]
    /// Objects whose session is being opened (its files created or opened, off the lock), with the reads
    /// waiting for it: one open per object, and opens of different objects at once.
    var opening: [ObjectID: [CheckedContinuation<Void, Never>]] = [:]
    /// Objects with a session a flight ran on: closed (committed) as soon as nothing uses them.
    var fetched: Set<ObjectID> = []
    /// Sessions nothing uses, kept open until the time given (`linger`), and whether a task closes them then.
    var idleUntil: [ObjectID: ContinuousClock.Instant] = [:]
    var sweeping = false
  }

  private let sessions = Mutex(Sessions())

  /// The objects with origin flights running now, and how many each.
  var flightsByObject: [ObjectID: Int] {
    sessions.withLock { sessions in
      sessions.open.compactMapValues { $0.flights > 0 ? $0.flights : nil }
    }
  }
  /// How long a session only read from stays open after its last read (`idleSessionLinger`).
  let linger: Duration

  init(cache: MediaCache, linger: Duration = .zero) {
    self.cache = cache
    self.linger = linger
  }

  /// No session is open, being opened or closing.
  var isQuiet: Bool {
    sessions.withLock { $0.open.isEmpty && $0.opening.isEmpty && $0.closing.isEmpty }
  }

  /// The sessions open now.
  func openSessions() -> [ObjectSession] {
    sessions.withLock { $0.open.values.map(\.session) }
  }

  /// The session of the object at `url`, opened (its data manager created or opened on the I/O executor) if
  /// no read has it open; one open per object at a time, and none while its previous session is closing.
  func openSession(_ url: String, environment: SessionEnvironment) async throws -> ObjectSession {
    let id = cache.objectID(for: url)
    enum Step {
      case open(ObjectSession)
      case wait
      case create
    }
    while true {
      let step = sessions.withLock { state -> Step in
        if let entry = state.open[id] {
          state.open[id] = (entry.session, entry.users + 1, entry.flights)
          state.idleUntil[id] = nil
          return .open(entry.session)
        }
        // The previous session of this object is committing, or another read is opening it.
        if state.closing[id] != nil || state.opening[id] != nil { return .wait }
        state.opening[id] = []
        return .create
      }
      switch step {
      case .open(let session):
        return session
      case .wait:
        // A close is short, and so is an open: then look again.
        await withCheckedContinuation { continuation in
          let waiting = sessions.withLock { state in
            if state.opening[id] != nil {
              state.opening[id]!.append(continuation)
            } else if state.closing[id] != nil {
              state.closing[id]!.append(continuation)
            } else {
              return false
            }
            return true
          }
          if !waiting { continuation.resume() }
        }
      case .create:
        // Creating or opening the object's files makes blocking calls: on the blocking pool, not under the
        // lock, so other objects' reads go on meanwhile. A new object's data file is made by its first write
        // (`deferringCreation`), after its first origin request went out (and usually after its first bytes
        // were handed over).
        let manager: FileHandleAssetDataManager
        do {
          manager = try await IOExecutor.shared.run { [cache] in
            try cache.assetDataManager(for: url, deferringCreation: true)
          }
        } catch {
          let waiting = sessions.withLock { $0.opening.removeValue(forKey: id) ?? [] }
          for reader in waiting { reader.resume() }
          throw error
        }
        let session = ObjectSession(url: url, manager: manager, environment: environment)
        let waiting = sessions.withLock { state in
          state.open[id] = (session, 1, 0)
          return state.opening.removeValue(forKey: id) ?? []
        }
        for reader in waiting { reader.resume() }
        return session
      }
    }
  }

  /// The session of the object with `id` if a read or flight has it open now (counted as one more read:
  /// `closeSession` ends it), without waiting or opening anything; nil otherwise.
  func sessionIfOpen(_ id: ObjectID) -> ObjectSession? {
    sessions.withLock { state in
      guard let entry = state.open[id] else { return nil }
      state.open[id] = (entry.session, entry.users + 1, entry.flights)
      state.idleUntil[id] = nil
      return entry.session
    }
  }

  /// A read is done with the session. When no read has it open any more, what is complete is committed (as
  /// the close would), and the data manager closes once no flight is running on it either.
  func closeSession(_ session: ObjectSession) {
    release(session, flight: false)
  }

  /// A running flight keeps its session (and data manager) open: a reader that got its range and left lets
  /// the flight finish the chunk it is in, which needs the manager until the chunk is committed. Returns false
  /// (nothing to release later) if the session is no longer open.
  func retainSession(forFlightOf session: ObjectSession) -> Bool {
    sessions.withLock { state in
      let id = session.manager.objectID
      guard let entry = state.open[id], entry.session === session else { return false }
      state.open[id] = (session, entry.users, entry.flights + 1)
      state.fetched.insert(id)
      state.idleUntil[id] = nil
      return true
    }
  }

  /// A flight retained with `retainSession(forFlightOf:)` ended.
  func releaseSession(forFlightOf session: ObjectSession) {
    release(session, flight: true)
  }

  private func release(_ session: ObjectSession, flight: Bool) {
    let id = session.manager.objectID
    let linger = self.linger
    let (close, flush, sweep) = sessions.withLock { state -> (Bool, Bool, Bool) in
      guard var entry = state.open[id], entry.session === session else { return (false, false, false) }
      if flight { entry.flights -= 1 } else { entry.users -= 1 }
      if entry.users <= 0 && entry.flights <= 0 {
        if linger > .zero, !state.fetched.contains(id) {
          // Only read from: nothing to commit, kept open for the next read a while.
          state.open[id] = entry
          state.idleUntil[id] = .now + linger
          defer { state.sweeping = true }
          return (false, false, !state.sweeping)
        }
        state.open[id] = nil
        state.closing[id] = []
        state.fetched.remove(id)
        return (true, false, false)
      }
      state.open[id] = entry
      return (false, !flight && entry.users <= 0, false)
    }
    if sweep { sweepIdle() }
    // A first fetch that failed before it wrote anything (an origin that never answered, an error status) made
    // no data file; one that failed after a write and before a commit leaves a data file without a manifest:
    // the manager's close removes it, unless another process has it open or a manifest appeared meanwhile, so
    // the cache does not keep an orphan for each failed URL.
    // Closing and flushing commit (fsync, rename): on the I/O executor; reads of the object that arrive
    // meanwhile wait for the close (`closing`).
    if close {
      commitInBackground(session, closing: true) { [self] in
        let waiting = sessions.withLock { $0.closing.removeValue(forKey: id) ?? [] }
        for reader in waiting { reader.resume() }
      }
    }
    if flush { commitInBackground(session, closing: false) {} }
  }

  /// Closes the sessions kept open while idle: that of `id`, or all for nil, or (with `expiredOnly`) those
  /// idle for `linger`. Each close has begun (`MediaCache.closing`) when this returns.
  func closeIdle(_ id: ObjectID?, expiredOnly: Bool = false) {
    let now = ContinuousClock.now
    let closed = sessions.withLock { state -> [ObjectSession] in
      let ids = id.map { state.idleUntil[$0] == nil ? [] : [$0] } ?? Array(state.idleUntil.keys)
      var closed: [ObjectSession] = []
      for id in ids {
        guard let until = state.idleUntil[id], !expiredOnly || until <= now, let entry = state.open[id],
          entry.users <= 0, entry.flights <= 0
        else { continue }
        state.idleUntil[id] = nil
        state.open[id] = nil
        state.closing[id] = []
        closed.append(entry.session)
      }
      return closed
    }
    for session in closed {
      let id = session.manager.objectID
      commitInBackground(session, closing: true) { [self] in
        let waiting = sessions.withLock { $0.closing.removeValue(forKey: id) ?? [] }
        for reader in waiting { reader.resume() }
      }
    }
  }

  /// Closes idle sessions once their linger is over, every half linger, until none is left.
  private func sweepIdle() {
    let interval = max(linger / 2, .milliseconds(10))
    Task { [self] in
      while true {
        try? await Task.sleep(for: interval)
        closeIdle(nil, expiredOnly: true)
        let done = sessions.withLock { state in
          if state.idleUntil.isEmpty { state.sweeping = false }
          return !state.sweeping
        }
        if done { return }
      }
    }
  }

  /// Closes (`closing`) or flushes the session's data manager on the I/O executor, with the object marked as
  /// closing meanwhile (questions about it wait), then runs `done`. Nobody waits for the outcome: a failure is
  /// logged, and what it could not commit is fetched again when next needed.
  func commitInBackground(
    _ session: ObjectSession, closing: Bool, then done: @escaping @Sendable () -> Void
  ) {
    let id = session.manager.objectID
    cache.closing.begin(id)
    IOExecutor.shared.submit { [cache] in
      do {
        if closing { try session.manager.close() } else { try session.manager.flush() }
      } catch let error as StoreError where !closing && error.code == .closed {
        // The flight's end closed the manager first (the executor runs jobs on several threads, so the close
        // submitted after this flush may run before it): that close committed everything. Not a failure (it
        // was logged at error level, dozens of times a minute under tools/soak).
      } catch {
        session.environment.logger.error(
          "committing a cached object failed; its last chunks will be fetched again",
          metadata: [
            "url": "\(session.url)", "object": "\(id.hex)", "operation": "\(closing ? "close" : "flush")",
            "error": "\(error)",
          ])
      }
      cache.closing.end(id)
      done()
    }
  }
}
