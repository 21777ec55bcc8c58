import Foundation
import MediaCache
import NIOCore
import NIOPosix
import Synchronization

/// One origin request filling a run of chunks of one object, shared by every reader in this process that needs
/// those bytes (single flight).
///
/// Bytes are written to the cache as they arrive and handed to readers at once, as the origin response's own
/// buffers (slices of them: no byte is copied on the way). Only the current, incomplete chunk is kept in
/// memory: a reader that joins late or falls behind reads the earlier bytes from the cache (those chunks are
/// complete and CRC-checked), then the in-memory tail, then live bytes.
///
/// The rules live in `FlightState`, a value whose transitions return actions; this class holds it under a
/// lock, carries the actions out once the lock is let go (waking readers, cancelling the request, grace
/// timers) and publishes what the writer on the origin's event loop reads without the lock (`endHint`,
/// `graceDeadline`). Every transition is a short synchronous call, so the origin's side (`BodyWriter`) makes
/// it from the thread it is on, the event loop or the I/O thread that wrote the bytes, with no task between:
/// a reader waiting for the bytes is resumed from there. Only the waits suspend.
final class Flight: Sendable {
  typealias Piece = FlightState.Piece

  /// The state and who waits on it, under `lock`.
  struct Inner {
    var state: FlightState
    /// Readers waiting for the flight to change.
    var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    /// The fetching task, waiting for a reader to get near enough for the next window.
    var demandWaiter: CheckedContinuation<Void, Never>?
  }

  /// What a transition leaves to do once the lock is let go.
  private struct Effects {
    var resume: [CheckedContinuation<Void, Never>] = []
    var cancelRequest = false
    var graces: [(duration: Duration, number: Int)] = []
  }

  /// Not private only for `awaitNextRequest` (Flight+NextRequest.swift); nothing else takes it.
  let lock: Mutex<Inner>
  private let nextWaiter = Atomic<Int>(0)
  /// Identifies the flight's origin request to the scheduler.
  let id = Flight.nextID.add(1, ordering: .relaxed).newValue
  private static let nextID = Atomic<Int>(0)
  let start: Int64
  /// Where the flight's first origin request ends (`FlightState.nextRequestEnd` of the new flight), for the
  /// reader that makes the flight and sends that request itself (`ObjectSession.sendFirstRequest`).
  let firstRequestEnd: Int64?
  /// The fetching task (set once, right after the flight is made).
  private let task = Mutex<Task<Void, Never>?>(nil)
  /// Readers blocked waiting for bytes right now; while there are none, the writer hands bytes over in larger
  /// batches, since nobody is waiting for them.
  let blockedReaders = Atomic<Int>(0)
  /// Where this flight's players count their waits for the origin (the reader's; nil: not counted).
  let playerWaits: PlayerWaits?
  /// How far bytes have been written to the cache, counting the body part the I/O executor is writing now
  /// (ahead of `received` by the batches written and not yet handed over; see `FlightState.unwrittenEnd`).
  let writtenHint: Atomic<Int64>
  /// `end` as seen without the lock: -1 for none.
  let endHint = Atomic<Int64>(-1)
  /// While abandoned: when its grace ends (`NIODeadline` uptime nanoseconds); 0 otherwise. The writer stops at
  /// the chunk it is in once this has passed, even before `endGrace` runs.
  let graceDeadline = Atomic<UInt64>(0)
  /// Whether the flight is background work (no player waits for it), for `BackgroundRateLimit` on the origin's
  /// event loop; cleared when a player joins.
  let isBackground: Atomic<Bool>
  /// Where the grace timers run: an event loop (the origin client's), not a task on Swift's cooperative pool,
  /// which a busy process can starve for seconds while the abandoned request runs on.
  private let timers: any EventLoopGroup

  init(
    start: Int64, end: Int64?, chunkSize: Int, priority: ReadPriority = .foreground, readAhead: Int64 = 0,
    grace: Duration = .zero, window: Int64 = 0, playerWaits: PlayerWaits? = nil, attached: Bool = false,
    timers: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
  ) {
    self.playerWaits = playerWaits
    self.timers = timers
    var state = FlightState(
      start: start, end: end, chunkSize: chunkSize, priority: priority, readAhead: readAhead, grace: grace,
      window: window)
    // `attached`: its maker is its first reader, counted here rather than by a call of `attach`.
    if attached { _ = state.attach(priority: priority, written: start) }
    self.firstRequestEnd = state.nextRequestEnd()
    self.lock = Mutex(Inner(state: state))
    self.start = start
    self.endHint.store(end ?? -1, ordering: .relaxed)
    self.writtenHint = Atomic(start)
    self.isBackground = Atomic(priority == .background)
  }

  // MARK: What the state says

  private func look<T: Sendable>(_ body: (borrowing FlightState) -> T) -> T {
    lock.withLock { inner in body(inner.state) }
  }

  var end: Int64? { look { $0.end } }
  var received: Int64 { look { $0.received } }
  var priority: ReadPriority { look { $0.priority } }
  var head: OriginMetadata? { look { $0.head } }
  var isLive: Bool { look { $0.isLive } }
  /// See `FlightState.bytesBeingWritten`.
  var bytesBeingWritten: BytesAtHand.InFlight? { look { $0.bytesBeingWritten } }
  private var written: Int64 { writtenHint.load(ordering: .relaxed) }

  /// The error the flight ended with, if it failed.
  var failure: (any Error)? { look { if case .failure(let error) = $0.outcome { error } else { nil } } }

  /// See `FlightState.canServe`.
  func canServe(_ position: Int64) -> Bool {
    let written = self.written
    return look { $0.canServe(position, written: written, now: .now) }
  }

  /// See `FlightState.warmUpRemaining`.
  func warmUpRemaining(for position: Int64) -> Duration? {
    look { $0.warmUpRemaining(for: position, now: .now) }
  }

  func setTask(_ task: Task<Void, Never>) {
    self.task.withLock { $0 = task }
    // Cancelled before its task was known (`ObjectSession.cancelAll` right after the flight was made, when a
    // cancel found no task to stop): the task stops at once.
    if !isLive { task.cancel() }
  }

  /// See `FlightState.nextRequestEnd`.
  func nextRequestEnd() -> Int64? { look { $0.nextRequestEnd() } }

  // MARK: Transitions

  /// A reader joins. Returns true if that promoted the flight from background to foreground (the caller tells
  /// the scheduler, so the request does not keep waiting for a background slot).
  /// A reader that does not pull bytes (`streaming` false: it waits for the run to end) makes the flight ask
  /// for the rest of its run at once.
  @discardableResult
  func attach(priority: ReadPriority = .foreground, streaming: Bool = true) -> Bool {
    attach(priority: priority, streaming: streaming, ifServing: nil) ?? false
  }

  /// A reader at `position` joins, as `attach` does, if the flight can serve it (`canServe`), in one step: a
  /// flight that closes between the look and the join (its last reader done) is not joined. Nil when it cannot
  /// serve the position; else whether the join promoted it.
  func join(at position: Int64, priority: ReadPriority = .foreground, streaming: Bool = true) -> Bool? {
    attach(priority: priority, streaming: streaming, ifServing: position)
  }

  private func attach(priority: ReadPriority, streaming: Bool, ifServing position: Int64?) -> Bool? {
    let written = self.written
    var promoted: Bool?
    transition { state in
      if let position, !state.canServe(position, written: written, now: .now) { return [] }
      let (didPromote, actions) = state.attach(priority: priority, written: written)
      promoted = didPromote
      return streaming ? actions : actions + state.dropWindow()
    }
    if promoted == true { isBackground.store(false, ordering: .relaxed) }
    return promoted
  }

  /// A reader left (see `FlightState.detach`).
  func detach(finishingChunk: Bool = false) {
    let written = self.written
    transition { $0.detach(finishingChunk: finishingChunk, written: written) }
  }

  /// Cancels the origin request; readers waiting get `CancellationError`.
  func cancel() { transition { $0.cancel() } }

  /// Stops the run at `newEnd` (another flight fetches what follows).
  func limit(to newEnd: Int64) {
    let written = self.written
    transition { $0.limit(to: newEnd, written: written) }
  }

  /// The origin's head, and the bytes that came with it (written to the cache) in the same step, so that a
  /// reader waiting for one change of the flight (`held`) gets the bytes with the head.
  func setHead(
    _ metadata: OriginMetadata, delivering pieces: [ByteBuffer] = [], at offset: Int64 = 0, version: UInt32?
  ) {
    transition { state in
      let actions = state.setHead(metadata)
      return pieces.isEmpty
        ? actions : actions + state.deliver(pieces, at: offset, version: version, now: .now)
    }
  }

  /// As `setHead(_:delivering:at:version:)`, for bytes the caller writes now, under object version `version`
  /// (see `FlightState.deliverWhileWriting`).
  func setHead(
    _ metadata: OriginMetadata, deliveringWhileWriting pieces: [ByteBuffer], at offset: Int64, version: UInt32
  ) {
    transition { state in
      let actions = state.setHead(metadata)
      return pieces.isEmpty
        ? actions : actions + state.deliverWhileWriting(pieces, at: offset, version: version, now: .now)
    }
  }

  /// The bytes `setHead(_:deliveringWhileWriting:at:version:)` delivered are written, or their write failed
  /// (the request fails).
  func wroteDeliveredBytes() { transition { $0.wroteDeliveredBytes() } }

  /// Bytes that arrived at `offset` (already written to the cache, under object version `version`).
  func deliver(_ pieces: [ByteBuffer], at offset: Int64, version: UInt32?) {
    transition { $0.deliver(pieces, at: offset, version: version, now: .now) }
  }

  /// Lets go of bytes held of another version than `version` (`FlightState.discardBytes(unlessOf:)`).
  func discardBytes(unlessOf version: UInt32) { transition { $0.discardBytes(unlessOf: version) } }

  func finish(_ result: Result<Void, any Error>) { transition { $0.finish(result) } }

  private func endGrace(of number: Int) {
    let written = self.written
    transition { $0.endGrace(of: number, written: written) }
  }

  /// Runs a transition of the state under the lock, then carries out its actions.
  private func transition(_ body: (inout FlightState) -> [FlightAction]) {
    let effects = lock.withLock { inner -> Effects in
      let actions = body(&inner.state)
      return settle(actions, &inner)
    }
    carryOut(effects)
  }

  /// Under the lock: what `actions` (and any change) mean for the waiters and the published hints.
  private func settle(_ actions: [FlightAction], _ inner: inout Inner) -> Effects {
    var effects = Effects()
    // Whatever changed (a reader left, joined or moved on, the flight ended) may decide the next window.
    if let demand = inner.demandWaiter {
      effects.resume.append(demand)
      inner.demandWaiter = nil
    }
    endHint.store(inner.state.end ?? -1, ordering: .relaxed)
    if inner.state.graceRunning == nil { graceDeadline.store(0, ordering: .relaxed) }
    for action in actions {
      switch action {
      case .wake:
        effects.resume.append(contentsOf: inner.waiters.values)
        inner.waiters = [:]
      case .cancelRequest:
        effects.cancelRequest = true
      case .startGrace(let grace, let number):
        graceDeadline.store((NIODeadline.now() + TimeAmount(grace)).uptimeNanoseconds, ordering: .relaxed)
        effects.graces.append((grace, number))
      }
    }
    return effects
  }

  /// Outside the lock: wakes, cancels and starts timers as `settle` said.
  private func carryOut(_ effects: Effects) {
    for waiter in effects.resume { waiter.resume() }
    if effects.cancelRequest { task.withLock { $0 }?.cancel() }
    for grace in effects.graces {
      timers.next().scheduleTask(in: TimeAmount(grace.duration)) { self.endGrace(of: grace.number) }
    }
  }

  // MARK: Waiting

  /// Waits until the origin answered (or the flight failed); returns the head.
  func waitForHead() async throws -> OriginMetadata? {
    try await waitFor { state -> Result<OriginMetadata?, any Error>? in
      if let head = state.head { return .success(head) }
      switch state.outcome {
      case .failure(let error): return .failure(error)
      case .success: return .success(nil)
      case nil: return nil
      }
    }.get()
  }

  /// Waits until the flight has ended.
  func waitForEnd() async throws {
    try await waitFor { $0.outcome }.get()
  }

  /// Waits until no byte delivered is still being written (`FlightState.unwrittenEnd`): true, or false when the
  /// task was cancelled first.
  func waitUntilDeliveredBytesWritten() async -> Bool {
    (try? await waitFor { $0.unwrittenEnd == nil ? true : nil }) ?? false
  }

  /// The next bytes for a reader at `position` (at most `limit`), waiting for them if needed, with the object
  /// version bytes from memory were written under (nil: not told): a reader must not take another's.
  func next(from position: Int64, limit: Int) async throws -> (piece: Piece, version: UInt32?) {
    let next = try await waitFor(
      noting: position,
      onWait: { [playerWaits] state in
        let player = state.priority == .foreground
        self.blockedReaders.add(1, ordering: .relaxed)
        if player { playerWaits?.begin() }
        return {
          self.blockedReaders.subtract(1, ordering: .relaxed)
          if player { playerWaits?.end() }
        }
      }
    ) { state -> (next: FlightState.Next, version: UInt32?)? in
      let next = state.next(from: position, limit: limit)
      if case .wait = next { return nil }
      return (next, state.bytesVersion)
    }
    switch next.next {
    case .piece(let piece): return (piece, next.version)
    case .fail(let error): throw error
    case .wait: preconditionFailure("a wait is never the answer of a wait")
    }
  }

  /// The bytes held in memory for a reader at `position` (at most `limit`; see
  /// `FlightState.inMemory(from:limit:)`), waiting for them while they are written and on their way here
  /// (`FlightState.isComing`: a batch's hop behind); nil when they are neither, and the reader reads them from
  /// the cache. It waits for one change of the flight at most: that is the hand-over of those bytes unless
  /// something else happened first, and then the cache serves. The
  /// reader's demand moves there, as with `next(from:limit:)`.
  func held(from position: Int64, limit: Int) async -> (buffers: [ByteBuffer], version: UInt32?)? {
    var looks = 0
    let written = self.written
    let found = try? await waitFor(
      onWait: { _ in
        // Counted as blocked, so the writer hands its batch over at once instead of after its delay.
        self.blockedReaders.add(1, ordering: .relaxed)
        return { self.blockedReaders.subtract(1, ordering: .relaxed) }
      }
    ) { state -> (buffers: [ByteBuffer], version: UInt32?)?? in
      looks += 1
      if let buffers = state.inMemory(from: position, limit: limit) {
        return .some((buffers, state.bytesVersion))
      }
      guard looks == 1, state.isComing(position, written: written) else { return .some(nil) }
      return nil
    }
    guard let held = found ?? nil else { return nil }
    noteDemand(position)
    return held
  }

  /// A reader asked for `position`: the flight's demand moves there, and the fetching task is woken if that
  /// was further.
  private func noteDemand(_ position: Int64) {
    let demand = lock.withLock { inner -> CheckedContinuation<Void, Never>? in
      guard inner.state.noteDemand(position) else { return nil }
      defer { inner.demandWaiter = nil }
      return inner.demandWaiter
    }
    demand?.resume()
  }

  /// Waits until `decide` (run under the lock) gives an answer, for a change of the flight after each nil.
  /// `noting` moves the reader's demand there first; `onWait` runs under the lock as the caller starts to
  /// wait, and what it returns once the wait is over. A cancelled task stops waiting at once and throws
  /// CancellationError.
  private func waitFor<T: Sendable>(
    noting position: Int64? = nil,
    onWait: ((borrowing FlightState) -> @Sendable () -> Void)? = nil,
    _ decide: (inout FlightState) -> T?
  ) async throws -> T {
    if let position { noteDemand(position) }
    while true {
      let id = nextWaiter.add(1, ordering: .relaxed).newValue
      var decided: T?
      var waitEnded: (@Sendable () -> Void)?
      await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
          let ready = lock.withLock { inner -> Bool in
            if let answer = decide(&inner.state) {
              decided = answer
              return true
            }
            if Task.isCancelled { return true }
            waitEnded = onWait?(inner.state)
            inner.waiters[id] = continuation
            return false
          }
          if ready { continuation.resume() }
        }
      } onCancel: {
        lock.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
      }
      waitEnded?()
      if let decided { return decided }
      try Task.checkCancellation()
    }
  }
}
