import Foundation
import MediaCache
import NIOCore
import Synchronization

/// One origin request filling a run of chunks of one object, shared by every reader in this process that needs
/// those bytes (single flight).
///
/// Bytes are written to the cache as they arrive and handed to readers at once, as the origin response's own
/// buffers (slices of them: no byte is copied on the way). Only the current, incomplete chunk is kept in
/// memory: a reader that joins late or falls behind reads the earlier bytes from the cache (those chunks are
/// complete and CRC-checked), then the in-memory tail, then live bytes.
///
/// The rules live in `FlightState`, a value whose transitions return actions; this actor holds it, carries
/// the actions out (waking readers, cancelling the request, grace timers) and publishes what the writer on
/// the origin's event loop reads without a hop (`endHint`, `graceDeadline`).
actor Flight {
  typealias Piece = FlightState.Piece

  private var state: FlightState
  /// Identifies the flight's origin request to the scheduler.
  nonisolated let id = Flight.nextID.add(1, ordering: .relaxed).newValue
  private static let nextID = Atomic<Int>(0)
  nonisolated let start: Int64
  /// Where the flight's first origin request ends (`FlightState.nextRequestEnd` of the new flight), for the
  /// reader that makes the flight and sends that request itself (`ObjectSession.sendFirstRequest`).
  nonisolated let firstRequestEnd: Int64?
  private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
  private var nextWaiter = 0
  /// The fetching task (set once, right after the flight is made: no hop onto the actor for it).
  private nonisolated let task = Mutex<Task<Void, Never>?>(nil)
  /// Readers blocked waiting for bytes right now; while there are none, the fetch hands bytes over in larger
  /// batches (fewer hops), since nobody is waiting for them.
  nonisolated let blockedReaders = Atomic<Int>(0)
  /// Where this flight's players count their waits for the origin (the reader's; nil: not counted).
  nonisolated let playerWaits: PlayerWaits?
  /// How far bytes have been written to the cache, counting the body part the I/O executor is writing now
  /// (ahead of `received` by the batches written and not yet handed over).
  nonisolated let writtenHint: Atomic<Int64>
  /// `end` as seen without a hop: -1 for none.
  nonisolated let endHint = Atomic<Int64>(-1)
  /// While abandoned: when its grace ends (`NIODeadline` uptime nanoseconds); 0 otherwise. The writer stops at
  /// the chunk it is in once this has passed, even before `endGrace` runs.
  nonisolated let graceDeadline = Atomic<UInt64>(0)
  /// Bytes the origin's event loop has handed to the fetching task and that are not yet delivered here: the
  /// writer stops handing over bytes (they are in the cache already) while this is over `maxQueuedBytes`, so a
  /// starved fetching task cannot make memory grow.
  nonisolated let queuedBytes = Atomic<Int>(0)
  /// Whether the flight is background work (no player waits for it), for `BackgroundRateLimit` on the origin's
  /// event loop; cleared when a player joins.
  nonisolated let isBackground: Atomic<Bool>
  static let maxQueuedBytes = 4 << 20

  /// The fetching task, waiting for a reader to get near enough for the next window.
  private var demandWaiter: CheckedContinuation<Void, Never>?

  init(
    start: Int64, end: Int64?, chunkSize: Int, priority: ReadPriority = .foreground, readAhead: Int64 = 0,
    grace: Duration = .zero, window: Int64 = 0, playerWaits: PlayerWaits? = nil, attached: Bool = false
  ) {
    self.playerWaits = playerWaits
    var state = FlightState(
      start: start, end: end, chunkSize: chunkSize, priority: priority, readAhead: readAhead, grace: grace,
      window: window)
    // `attached`: its maker is its first reader, counted here rather than by a hop onto the actor.
    if attached { _ = state.attach(priority: priority, written: start) }
    self.state = state
    self.firstRequestEnd = state.nextRequestEnd()
    self.start = start
    self.endHint.store(end ?? -1, ordering: .relaxed)
    self.writtenHint = Atomic(start)
    self.isBackground = Atomic(priority == .background)
  }

  // MARK: What the state says

  var end: Int64? { state.end }
  var received: Int64 { state.received }
  var priority: ReadPriority { state.priority }
  var head: OriginMetadata? { state.head }
  var outcome: Result<Void, any Error>? { state.outcome }
  var isLive: Bool { state.isLive }
  private var written: Int64 { writtenHint.load(ordering: .relaxed) }

  /// The error the flight ended with, if it failed.
  var failure: (any Error)? {
    if case .failure(let error) = state.outcome { error } else { nil }
  }

  /// See `FlightState.canServe`.
  func canServe(_ position: Int64) -> Bool { state.canServe(position, written: written, now: .now) }

  /// See `FlightState.warmUpRemaining`.
  func warmUpRemaining(for position: Int64) -> Duration? { state.warmUpRemaining(for: position, now: .now) }

  nonisolated func setTask(_ task: Task<Void, Never>) { self.task.withLock { $0 = task } }

  /// See `FlightState.nextRequestEnd`.
  func nextRequestEnd() -> Int64? { state.nextRequestEnd() }

  /// After an origin request ended without error: waits until the next one is due and returns true, or
  /// returns false when the flight is done (`FlightState.afterRequest`).
  func awaitNextRequest(objectLength: @Sendable () -> Int64?) async -> Bool {
    while true {
      switch state.afterRequest(objectLength: objectLength()) {
      case .request: return true
      case .stop: return false
      case .wait:
        if Task.isCancelled { return false }
        await withTaskCancellationHandler {
          await withCheckedContinuation { demandWaiter = $0 }
        } onCancel: {
          Task { await self.wakeDemandWaiter() }
        }
      }
    }
  }

  private func wakeDemandWaiter() {
    demandWaiter?.resume()
    demandWaiter = nil
  }

  // MARK: Transitions

  /// A reader joins. Returns true if that promoted the flight from background to foreground (the caller tells
  /// the scheduler, so the request does not keep waiting for a background slot).
  /// A reader that does not pull bytes (`streaming` false: it waits for the run to end) makes the flight ask
  /// for the rest of its run at once.
  func attach(priority: ReadPriority = .foreground, streaming: Bool = true) -> Bool {
    let (promoted, actions) = state.attach(priority: priority, written: written)
    if promoted { isBackground.store(false, ordering: .relaxed) }
    perform(actions)
    if !streaming { perform(state.dropWindow()) }
    return promoted
  }

  /// A reader left (see `FlightState.detach`).
  func detach(finishingChunk: Bool = false) {
    perform(state.detach(finishingChunk: finishingChunk, written: written))
  }

  /// Cancels the origin request; readers waiting get `CancellationError`.
  func cancel() { perform(state.cancel()) }

  /// Stops the run at `newEnd` (another flight fetches what follows).
  func limit(to newEnd: Int64) { perform(state.limit(to: newEnd, written: written)) }

  func setHead(_ metadata: OriginMetadata) { perform(state.setHead(metadata)) }

  /// Bytes that arrived at `offset` (already written to the cache).
  func deliver(_ pieces: [ByteBuffer], at offset: Int64) {
    perform(state.deliver(pieces, at: offset, now: .now))
  }

  /// Bytes up to `offset` were written to the cache but not handed over.
  func skip(to offset: Int64) { perform(state.skip(to: offset, now: .now)) }

  func finish(_ result: Result<Void, any Error>) { perform(state.finish(result)) }

  private func endGrace(of number: Int) { perform(state.endGrace(of: number, written: written)) }

  private func perform(_ actions: [FlightAction]) {
    // Whatever changed (a reader left, joined or moved on, the flight ended) may decide the next window.
    wakeDemandWaiter()
    endHint.store(state.end ?? -1, ordering: .relaxed)
    if state.graceRunning == nil { graceDeadline.store(0, ordering: .relaxed) }
    for action in actions {
      switch action {
      case .wake:
        let current = waiters
        waiters = [:]
        for waiter in current.values { waiter.resume() }
      case .cancelRequest:
        task.withLock { $0 }?.cancel()
      case .startGrace(let grace, let number):
        graceDeadline.store((NIODeadline.now() + TimeAmount(grace)).uptimeNanoseconds, ordering: .relaxed)
        Task {
          try? await Task.sleep(for: grace)
          self.endGrace(of: number)
        }
      }
    }
  }

  // MARK: Waiting

  /// Waits until the origin answered (or the flight failed); returns the head.
  func waitForHead() async throws -> OriginMetadata? {
    while state.head == nil {
      if case .failure(let error) = state.outcome { throw error }
      if state.outcome != nil { return nil }
      try await wait()
    }
    return state.head
  }

  /// Waits until the flight has ended.
  func waitForEnd() async throws {
    while state.outcome == nil { try await wait() }
    try state.outcome?.get()
  }

  /// The next bytes for a reader at `position` (at most `limit`), waiting for them if needed.
  func next(from position: Int64, limit: Int) async throws -> Piece {
    if state.noteDemand(position) { wakeDemandWaiter() }
    while true {
      switch state.next(from: position, limit: limit) {
      case .piece(let piece): return piece
      case .fail(let error): throw error
      case .wait:
        let player = state.priority == .foreground
        blockedReaders.add(1, ordering: .relaxed)
        if player { playerWaits?.begin() }
        defer {
          blockedReaders.subtract(1, ordering: .relaxed)
          if player { playerWaits?.end() }
        }
        try await wait()
      }
    }
  }

  /// The bytes held in memory for a reader at `position` (at most `limit`; see
  /// `FlightState.inMemory(from:limit:)`), waiting for them while they are written and on their way here
  /// (`FlightState.isComing`: a batch's hop behind); nil when they are neither, and the reader reads them from
  /// the cache. It waits for one change of the flight at most: that is the hand-over of those bytes (or the
  /// writer's word that it skipped them) unless something else happened first, and then the cache serves. The
  /// reader's demand moves there, as with `next(from:limit:)`.
  func held(from position: Int64, limit: Int) async -> [ByteBuffer]? {
    for attempt in 0..<2 {
      if let buffers = state.inMemory(from: position, limit: limit) {
        if state.noteDemand(position) { wakeDemandWaiter() }
        return buffers
      }
      guard attempt == 0, state.isComing(position, written: written) else { return nil }
      // Counted as blocked, so the writer hands its batch over at once instead of after its delay.
      blockedReaders.add(1, ordering: .relaxed)
      defer { blockedReaders.subtract(1, ordering: .relaxed) }
      do { try await wait() } catch { return nil }
    }
    return nil
  }

  /// Waits for the next change; a cancelled waiting task stops waiting at once and throws CancellationError.
  private func wait() async throws {
    let id = nextWaiter
    nextWaiter += 1
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        if Task.isCancelled { continuation.resume() } else { waiters[id] = continuation }
      }
    } onCancel: {
      Task { await self.stopWaiting(id) }
    }
    try Task.checkCancellation()
  }

  private func stopWaiting(_ id: Int) {
    waiters.removeValue(forKey: id)?.resume()
  }
}
