import Foundation
import NIOCore
import Synchronization

/// One origin request filling a run of chunks of one object, shared by every reader in this process that needs
/// those bytes (single flight).
///
/// Bytes are written to the cache as they arrive and handed to readers at once, as the origin response's own
/// buffers (slices of them: no byte is copied on the way). Only the current, incomplete chunk is kept in memory: a reader that joins late or falls behind reads the earlier bytes from the cache
/// (those chunks are complete and CRC-checked), then the in-memory tail, then live bytes.
actor Flight {
  /// What a reader gets for a position.
  enum Piece: Sendable {
    /// Bytes from memory, starting at the position asked: slices of the response's buffers, in order.
    case memory([ByteBuffer])
    /// The position lies in a chunk this flight completed: read it from the cache.
    case disk
    /// The flight ended before the position (it was cut short, or the object ended).
    case end
  }

  /// First byte (chunk-aligned).
  let start: Int64
  /// Exclusive end of the run; nil: to the end of the object. The least of the end asked for at creation, a
  /// limit set by `limit(to:)` (another flight fetches what follows) and the read-ahead bound of an abandoned
  /// flight (`detach`).
  private(set) var end: Int64?
  /// The end before any read-ahead bound: what a reader joining an abandoned flight gets back.
  private var committedEnd: Int64?
  /// Set while no reader is attached: the flight stops here (a chunk boundary) unless a reader joins.
  private var abandonedEnd: Int64?
  /// Bytes fetched past the current chunk once the last reader left (see
  /// `CachingReader.Configuration.abandonedRequestReadAhead`).
  let readAhead: Int64
  /// How long an abandoned flight takes the bytes arriving after its last reader left before it settles on
  /// the chunk it is then in (`CachingReader.Configuration.abandonedRequestGrace`).
  let grace: Duration
  /// Counts abandonments, so a grace timer of an earlier one (a reader joined and left since) does nothing.
  private var abandonment = 0
  /// Identifies the flight's origin request to the scheduler.
  nonisolated let id = Flight.nextID.add(1, ordering: .relaxed).newValue
  private static let nextID = Atomic<Int>(0)
  /// Foreground once any foreground reader attached (a prefetch joined by a player is promoted).
  private(set) var priority: ReadPriority
  let chunkSize: Int64
  /// Every byte before this has arrived and been written to the cache.
  private(set) var received: Int64
  /// Start of the bytes kept in `buffer`: the beginning of the incomplete chunk holding `received`.
  private var bufferStart: Int64
  /// Where `parts` start: `bufferStart`, or later when bytes of the incomplete chunk were skipped (written
  /// to the cache but not handed over, see `skip(to:)`).
  private var memoryStart: Int64
  /// The incomplete chunk's bytes from `memoryStart` to `received`, as received (contiguous).
  private var parts: [ByteBuffer] = []
  private(set) var outcome: Result<Void, any Error>?
  /// What the origin said in its response head, once it answered.
  private(set) var head: OriginMetadata?
  private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
  private var nextWaiter = 0
  /// The last reader left and the request is being cancelled: nobody may join any more.
  private var closing = false
  /// Readers blocked waiting for bytes right now; while there are none, the fetch hands bytes over in larger
  /// batches (fewer hops), since nobody is waiting for them.
  nonisolated let blockedReaders = Atomic<Int>(0)
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
  static let maxQueuedBytes = 4 << 20
  private var readers = 0
  private var task: Task<Void, Never>?

  init(
    start: Int64, end: Int64?, chunkSize: Int, priority: ReadPriority = .foreground, readAhead: Int64 = 0,
    grace: Duration = .zero
  ) {
    self.start = start
    self.grace = grace
    self.end = end
    self.committedEnd = end
    self.priority = priority
    self.readAhead = max(0, readAhead)
    self.endHint.store(end ?? -1, ordering: .relaxed)
    self.writtenHint = Atomic(start)
    self.chunkSize = Int64(chunkSize)
    self.received = start
    self.bufferStart = start
    self.memoryStart = start
  }

  /// Whether a reader at `position` can be served by this flight soon: inside the run, and not more than two
  /// chunks ahead of what has arrived (farther ahead, a new request is faster).
  func canServe(_ position: Int64) -> Bool {
    // An abandoned flight's read-ahead bound goes away when a reader joins: it may serve up to its committed end.
    guard outcome == nil, !closing, position >= start, committedEnd.map({ position < $0 }) ?? true else {
      return false
    }
    // Bytes before the in-memory chunk are complete in the cache: a reader that needs them from a flight
    // found them dropped, and must start a new request.
    guard position >= bufferStart else { return false }
    let arrived = max(received, writtenHint.load(ordering: .relaxed))
    let ahead = position - arrived
    if ahead <= 2 * chunkSize { return true }
    // Farther ahead, a flight fast enough to get there within `joinHorizon` is joined: a new request would
    // take about as long to answer, and stopping this one there would waste what is already in transit. Not an
    // abandoned one past the bound it settled for: its player went elsewhere, and joining it there would fetch
    // everything between, which nobody asked for (an origin that sends in bursts makes any flight look fast:
    // a scripted play once fetched the whole gap its player skipped).
    if abandonedEnd != nil, end.map({ position >= $0 }) ?? true { return false }
    guard let firstByte else { return false }
    let elapsed = firstByte.instant.duration(to: .now)
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    guard seconds >= 0.01, arrived > firstByte.offset else { return false }
    let rate = Double(arrived - firstByte.offset) / seconds
    return Double(ahead) / rate <= Self.joinHorizon
  }

  /// How soon (seconds, at its rate so far) a flight must reach a position for a reader there to join it.
  static let joinHorizon = 0.15
  /// How long after its first byte a flight's rate is too uncertain to judge by (see `warmUpRemaining`).
  static let warmUp = Duration.milliseconds(50)

  /// For a reader at `position` that this flight's run covers but that `canServe` turned down: how long until
  /// the flight has run `warmUp` since its first byte, if it has not yet. A player that seeks right after
  /// opening (to a moov at the end) would otherwise start a new request just before a fast origin's response
  /// got there, and the bytes of that response already in transit would be wasted; waiting that long at most
  /// once lets the rate decide.
  func warmUpRemaining(for position: Int64) -> Duration? {
    guard outcome == nil, !closing, position >= bufferStart, committedEnd.map({ position < $0 }) ?? true,
      abandonedEnd == nil || end.map({ position < $0 }) ?? false, let firstByte
    else { return nil }
    let age = firstByte.instant.duration(to: .now)
    return age < Self.warmUp ? Self.warmUp - age : nil
  }
  /// When and where the first body byte arrived (for the flight's rate).
  private var firstByte: (instant: ContinuousClock.Instant, offset: Int64)?

  func setTask(_ task: Task<Void, Never>) { self.task = task }

  /// A reader joins. Returns true if that promoted the flight from background to foreground (the caller tells
  /// the scheduler, so the request does not keep waiting for a background slot).
  func attach(priority: ReadPriority = .foreground) -> Bool {
    readers += 1
    if abandonedEnd != nil {
      abandonedEnd = nil
      graceDeadline.store(0, ordering: .relaxed)
      setEnd(committedEnd)
    }
    guard priority == .foreground, self.priority == .background else { return false }
    self.priority = .foreground
    return true
  }

  /// A reader left. When the last one leaves, the origin request is not cancelled: a reader that reached the
  /// end of its range (`finishingChunk`) lets the flight finish the chunk it is in, so the range's last chunk
  /// is cached too; a reader that gave up early (a player dropping a `bytes=N-` connection to seek) lets it
  /// take what arrives within `grace` (bytes the origin had already sent, on their way: cutting the request
  /// would waste them), at most `readAhead` bytes past the chunk it is in, then finish the chunk it is in
  /// when the grace ends. A reader that joins meanwhile lifts that bound, so the player's next request for what
  /// follows joins the request instead of asking the origin for the same bytes again. A background flight
  /// (prefetch) whose reader left is cancelled. The waste of an abandoned request is thus at most the rest of
  /// its chunk plus what was in transit when it stopped, and what arrives within `grace` bounds the bytes it
  /// takes that nobody may read.
  func detach(finishingChunk: Bool = false) {
    readers -= 1
    guard readers <= 0, outcome == nil, !closing else { return }
    let chunkEnd = ((received + chunkSize - 1) / chunkSize) * chunkSize
    if finishingChunk && received > start && chunkEnd > received {
      limit(to: chunkEnd)
      return
    }
    // Background work that was stopped (a cancelled prefetch) is not expected back: it stops at once, as does
    // a flight whose reader got all it asked for.
    if finishingChunk || priority == .background {
      closing = true
      task?.cancel()
      return
    }
    let bound = chunkEnd + ((readAhead + chunkSize - 1) / chunkSize) * chunkSize
    abandonedEnd = bound
    setEnd(committedEnd.map { min($0, bound) } ?? bound)
    abandonment += 1
    let current = abandonment
    if grace > .zero {
      let nanoseconds =
        UInt64(grace.components.seconds) * 1_000_000_000
        + UInt64(grace.components.attoseconds / 1_000_000_000)
      graceDeadline.store(NIODeadline.now().uptimeNanoseconds + nanoseconds, ordering: .relaxed)
      Task { [grace] in
        try? await Task.sleep(for: grace)
        self.endGrace(of: current)
      }
    } else {
      endGrace(of: current)
    }
  }

  /// The grace of abandonment `number` is over: unless a reader joined since, the flight stops at the end of
  /// the chunk it is in now.
  private func endGrace(of number: Int) {
    guard number == abandonment, let bound = abandonedEnd, readers <= 0, outcome == nil, !closing else {
      return
    }
    let arrived = max(received, writtenHint.load(ordering: .relaxed))
    let chunkEnd = ((arrived + chunkSize - 1) / chunkSize) * chunkSize
    let settled = min(bound, max(chunkEnd, start + chunkSize))
    graceDeadline.store(0, ordering: .relaxed)
    abandonedEnd = settled
    setEnd(committedEnd.map { min($0, settled) } ?? settled)
  }

  private func setEnd(_ newEnd: Int64?) {
    end = newEnd.map { max($0, received) }
    endHint.store(end ?? -1, ordering: .relaxed)
    // An abandoned flight that already has every byte it is to keep (its grace ended on a chunk boundary it had
    // reached) stops its origin request now. Left open, the request would end only when the origin's next
    // bytes arrived, and an origin that sends in bursts (nginx's limit_rate sends a second's worth at once)
    // would send a whole burst for nothing first.
    // Bytes written to the cache but not yet handed over (`writtenHint`) count: nobody is left to hand them to.
    if readers <= 0, let end, end <= max(received, writtenHint.load(ordering: .relaxed)), outcome == nil,
      !closing
    {
      closing = true
      task?.cancel()
      finish(.success(()))
      return
    }
    wakeAll()
  }

  /// Cancels the origin request; readers waiting get `CancellationError`.
  func cancel() {
    task?.cancel()
    finish(.failure(CancellationError()))
  }

  /// Stops the run at `newEnd` (another flight fetches what follows).
  func limit(to newEnd: Int64) {
    if committedEnd.map({ newEnd < $0 }) ?? true { committedEnd = max(newEnd, received) }
    let bounded = abandonedEnd.map { bound in committedEnd.map { min($0, bound) } ?? bound } ?? committedEnd
    setEnd(bounded)
  }

  /// Whether the flight is still fetching (or about to): a new flight must not overlap it.
  var isLive: Bool { outcome == nil && !closing }

  func setHead(_ metadata: OriginMetadata) {
    head = metadata
    wakeAll()
  }

  /// Bytes that arrived at `offset` (already written to the cache). Bytes before `received` (a retry's overlap,
  /// or a 200 body's bytes before the run) are not delivered again.
  func deliver(_ pieces: [ByteBuffer], at offset: Int64) {
    if firstByte == nil { firstByte = (.now, offset) }
    var position = offset
    for piece in pieces {
      deliver(piece, at: position)
      position += Int64(piece.readableBytes)
    }
    wakeAll()
  }

  private func deliver(_ bytes: ByteBuffer, at offset: Int64) {
    let newEnd = offset + Int64(bytes.readableBytes)
    guard newEnd > received else { return }
    var fresh = bytes
    fresh.moveReaderIndex(forwardBy: Int(max(offset, received) - offset))
    received = newEnd
    let chunkStart = (received / chunkSize) * chunkSize
    if chunkStart > bufferStart {
      // The earlier chunks are complete in the cache; keep only the incomplete one.
      bufferStart = max(chunkStart, start)
      memoryStart = bufferStart
      fresh.moveReaderIndex(forwardBy: fresh.readableBytes - Int(received - bufferStart))
      parts = fresh.readableBytes > 0 ? [fresh] : []
    } else if fresh.readableBytes > 0 {
      parts.append(fresh)
    }
  }

  /// Bytes up to `offset` were written to the cache but not handed over (the fetching task fell behind):
  /// readers get the incomplete chunk's bytes from here on only, and the earlier ones from the cache once the
  /// chunk completes.
  func skip(to offset: Int64) {
    guard offset > received else { return }
    if firstByte == nil { firstByte = (.now, received) }
    received = offset
    let chunkStart = (received / chunkSize) * chunkSize
    if chunkStart > bufferStart { bufferStart = max(chunkStart, start) }
    memoryStart = received
    parts = []
    wakeAll()
  }

  func finish(_ result: Result<Void, any Error>) {
    if outcome == nil { outcome = result }
    parts = []
    bufferStart = received
    memoryStart = received
    wakeAll()
  }

  /// Waits until the origin answered (or the flight failed); returns the head.
  func waitForHead() async throws -> OriginMetadata? {
    while head == nil {
      if case .failure(let error) = outcome { throw error }
      if outcome != nil { return nil }
      try await wait()
    }
    return head
  }

  /// Waits until the flight has ended.
  func waitForEnd() async throws {
    while outcome == nil { try await wait() }
    try outcome?.get()
  }

  /// The next bytes for a reader at `position` (at most `limit`), waiting for them if needed.
  func next(from position: Int64, limit: Int) async throws -> Piece {
    while true {
      if position < bufferStart { return .disk }
      if position < memoryStart {
        // Skipped bytes of the incomplete chunk: in the cache once the chunk completes.
        if outcome != nil { return .disk }
        blockedReaders.add(1, ordering: .relaxed)
        defer { blockedReaders.subtract(1, ordering: .relaxed) }
        try await wait()
        continue
      }
      if position < received { return .memory(slices(from: position, limit: limit)) }
      if let end, position >= end { return .end }
      switch outcome {
      case .failure(let error): throw error
      case .success: return .end
      case nil:
        blockedReaders.add(1, ordering: .relaxed)
        defer { blockedReaders.subtract(1, ordering: .relaxed) }
        try await wait()
      }
    }
  }

  /// Up to `limit` bytes of `parts` from `position` (between `memoryStart` and `received`), sharing their
  /// storage.
  private func slices(from position: Int64, limit: Int) -> [ByteBuffer] {
    var skip = Int(position - memoryStart)
    var wanted = limit
    var result: [ByteBuffer] = []
    for part in parts where wanted > 0 {
      let count = part.readableBytes
      if skip >= count {
        skip -= count
        continue
      }
      let take = min(count - skip, wanted)
      result.append(part.getSlice(at: part.readerIndex + skip, length: take)!)
      wanted -= take
      skip = 0
    }
    return result
  }

  private func wakeAll() {
    let current = waiters
    waiters = [:]
    for waiter in current.values { waiter.resume() }
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
