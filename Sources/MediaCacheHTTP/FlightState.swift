import MediaCache
import NIOCore

/// What `Flight` must do after a transition of its `FlightState`, once its lock is let go.
enum FlightAction: Equatable {
  /// Wake every reader waiting for the flight to change.
  case wake
  /// Cancel the origin request (the flight is closing; readers are not told: none is attached).
  case cancelRequest
  /// Start the grace timer of abandonment `number`: after `duration`, call `endGrace(of: number)`.
  case startGrace(Duration, number: Int)
}

/// The state of one origin request filling a run of chunks of one object, and every rule about it, as a value:
/// each transition returns the actions its owner (`Flight`, which holds it under a lock) carries out — waking readers, cancelling
/// the request, starting a timer. No clock, task or lock in here: the time and how far the writer has got are
/// passed in, so every transition is tested on its own (`FlightStateTests`).
///
/// A run starts at any byte and ends at `end` (nil: the object's end). Bytes arrive in order (`deliver`), written
/// to the cache, or a response's first bytes as they are written (`deliverWhileWriting`); only the chunk being
/// filled is kept (`parts`): a reader behind it reads the cache.
struct FlightState {
  /// What a reader gets for a position.
  enum Piece {
    /// Bytes from memory, starting at the position asked: slices of the response's buffers, in order.
    case memory([ByteBuffer])
    /// The position lies in a chunk this flight completed: read it from the cache.
    case disk
    /// The flight ended before the position (it was cut short, or the object ended).
    case end
  }

  /// What `next(from:limit:)` decided.
  enum Next {
    case piece(Piece)
    /// Nothing yet: wait for a change (a reader blocked here makes the writer hand bytes over sooner).
    case wait
    case fail(any Error)
  }

  /// First byte.
  let start: Int64
  let chunkSize: Int64
  /// Bytes fetched past what had arrived once the last reader left early (within `grace`).
  let readAhead: Int64
  /// How long an abandoned flight takes what arrives before it stops.
  let grace: Duration
  /// The least an origin request asks for past the furthest reader; 0: one request to `end` (see
  /// `CachingReader.Configuration.originRequestWindow`).
  private(set) var window: Int64
  /// The furthest position a reader has asked this flight for.
  private(set) var demand: Int64
  /// Exclusive end of the run; nil: to the end of the object. The least of the end asked for, a `limit` (another
  /// flight fetches what follows) and the read-ahead bound of an abandoned flight.
  private(set) var end: Int64?
  /// The end before any read-ahead bound: what a reader joining an abandoned flight gets back.
  private(set) var committedEnd: Int64?
  /// Set while no reader is attached: the flight stops here unless a reader joins.
  private(set) var abandonedEnd: Int64?
  /// Counts abandonments, so the grace timer of an earlier one does nothing.
  private(set) var abandonment = 0
  /// The abandonment whose grace is running, if any.
  private(set) var graceRunning: Int?
  /// Foreground once any foreground reader attached.
  private(set) var priority: ReadPriority
  /// Every byte before this has arrived and been written to the cache (but for those before `unwrittenEnd`).
  private(set) var received: Int64
  /// The end of bytes delivered while they were being written (`deliverWhileWriting`), until the writer says
  /// they are (`wroteDeliveredBytes`); nil when every byte delivered is written.
  private(set) var unwrittenEnd: Int64?
  /// Where the bytes before `unwrittenEnd` that are still being written start.
  private(set) var unwrittenStart: Int64 = 0
  /// The object version the bytes before `unwrittenEnd` are written under.
  private(set) var unwrittenVersion: UInt32 = 0
  /// Start of the chunk being filled, where `parts` start (after a failure, `received`: nothing is kept).
  private(set) var bufferStart: Int64
  /// The incomplete chunk's bytes from `bufferStart` to `received`, as received.
  private(set) var parts: [ByteBuffer] = []
  /// The object version `parts` were written under (nil: not told). Bytes of another version are not kept with
  /// them: a delivery under another version lets the earlier ones go (`deliver`), and a reader that finds the
  /// object at another version has them let go (`discardBytes(unlessOf:)`). After a reset (another flight's
  /// response of a new version, another process's write), this flight's writes are refused, but what it held
  /// is not of the object any more, and a reader that took it would send the old version's bytes under the new
  /// version's head.
  private(set) var bytesVersion: UInt32?
  private(set) var outcome: Result<Void, any Error>?
  /// What the origin said in its response head, once it answered.
  private(set) var head: OriginMetadata?
  /// The last reader left and the request is being cancelled: nobody may join any more.
  private(set) var closing = false
  private(set) var readers = 0
  /// When and where the first body byte arrived (for the flight's rate).
  private(set) var firstByte: (instant: ContinuousClock.Instant, offset: Int64)?

  /// How soon (seconds, at its rate so far) a flight must reach a position for a reader there to join it.
  static let joinHorizon = 0.15
  /// How long after its first byte a flight's rate is too uncertain to judge by (see `warmUpRemaining`).
  static let warmUp = Duration.milliseconds(50)

  init(
    start: Int64, end: Int64?, chunkSize: Int, priority: ReadPriority, readAhead: Int64, grace: Duration,
    window: Int64 = 0
  ) {
    self.start = start
    self.window = max(0, window)
    self.demand = start
    self.end = end
    self.committedEnd = end
    self.chunkSize = Int64(chunkSize)
    self.priority = priority
    self.readAhead = max(0, readAhead)
    self.grace = grace
    self.received = start
    self.bufferStart = start
  }

  /// Whether the flight is still fetching (or about to): a new flight must not overlap it.
  var isLive: Bool { outcome == nil && !closing }

  // MARK: Joining

  /// A reader joins. Returns whether that promoted the flight from background to foreground (its owner tells
  /// the scheduler), and the actions.
  mutating func attach(priority: ReadPriority, written: Int64) -> (promoted: Bool, actions: [FlightAction]) {
    readers += 1
    var actions: [FlightAction] = []
    if abandonedEnd != nil {
      abandonedEnd = nil
      graceRunning = nil
      actions = setEnd(committedEnd, written: written)
    }
    guard priority == .foreground, self.priority == .background else { return (false, actions) }
    self.priority = .foreground
    return (true, actions)
  }

  /// A reader left. When the last one leaves: a reader that reached the end of its range (`finishingChunk`)
  /// stops the request at once (what arrived is cached: whole chunks, and spans of the chunk it was in); a
  /// reader that gave up early lets it take what arrives within `grace`, at most `readAhead` past what had
  /// arrived, then stop (`endGrace`). A background flight whose reader left stops at once.
  mutating func detach(finishingChunk: Bool, written: Int64) -> [FlightAction] {
    readers -= 1
    guard readers <= 0, isLive else { return [] }
    if finishingChunk || priority == .background {
      closing = true
      return [.cancelRequest]
    }
    let bound = max(received, written) + readAhead
    abandonedEnd = bound
    var actions = setEnd(committedEnd.map { min($0, bound) } ?? bound, written: written)
    abandonment += 1
    if !isLive { return actions }  // everything it is to keep has arrived
    if grace > .zero {
      graceRunning = abandonment
      actions.append(.startGrace(grace, number: abandonment))
    } else {
      actions += endGrace(of: abandonment, written: written)
    }
    return actions
  }

  /// Where an abandoned flight whose grace is over stops, given how far its bytes have got: there (every
  /// byte that arrived is cached, as whole chunks or spans). `BodyWriter` applies the same rule on the
  /// origin's event loop before `endGrace` runs.
  static func settledEnd(arrived: Int64) -> Int64 { arrived }

  /// The grace of abandonment `number` is over: unless a reader joined since, the flight stops at what has
  /// arrived.
  mutating func endGrace(of number: Int, written: Int64) -> [FlightAction] {
    guard number == abandonment, let bound = abandonedEnd, readers <= 0, isLive else { return [] }
    let settled = min(bound, Self.settledEnd(arrived: max(received, written)))
    graceRunning = nil
    abandonedEnd = settled
    return setEnd(committedEnd.map { min($0, settled) } ?? settled, written: written)
  }

  /// Stops the run at `newEnd` (another flight fetches what follows).
  mutating func limit(to newEnd: Int64, written: Int64) -> [FlightAction] {
    if committedEnd.map({ newEnd < $0 }) ?? true { committedEnd = max(newEnd, received) }
    let bounded = abandonedEnd.map { bound in committedEnd.map { min($0, bound) } ?? bound } ?? committedEnd
    return setEnd(bounded, written: written)
  }

  /// An abandoned flight that already has every byte it is to keep stops its request now (left open, it would
  /// end only when the origin next sent, and an origin that sends in bursts would send a whole burst first).
  /// Bytes written but not yet handed over (`written`) count: nobody is left to hand them to.
  private mutating func setEnd(_ newEnd: Int64?, written: Int64) -> [FlightAction] {
    end = newEnd.map { max($0, received) }
    if readers <= 0, let end, end <= max(received, written), isLive {
      closing = true
      return [.cancelRequest] + finish(.success(()))
    }
    return [.wake]
  }

  /// Cancels the request; readers waiting get `CancellationError`.
  mutating func cancel() -> [FlightAction] {
    [.cancelRequest] + finish(.failure(CancellationError()))
  }

  // MARK: The origin's side

  mutating func setHead(_ metadata: OriginMetadata) -> [FlightAction] {
    head = metadata
    return [.wake]
  }

  /// Bytes that arrived at `offset` (written to the cache, under object version `version` when given).
  /// Bytes before `received` (a retry's overlap, or a 200 body's bytes before the run) are not delivered again.
  mutating func deliver(
    _ pieces: [ByteBuffer], at offset: Int64, version: UInt32? = nil, now: ContinuousClock.Instant
  ) -> [FlightAction] {
    if firstByte == nil { firstByte = (now, offset) }
    if let version {
      if let held = bytesVersion, held != version { dropParts() }
      bytesVersion = version
    }
    var position = offset
    for piece in pieces {
      deliver(piece, at: position)
      position += Int64(piece.readableBytes)
    }
    return [.wake]
  }

  /// Whether a response's first bytes, `count` from `start`, may be delivered while they are written
  /// (`BodyWriter`'s head job): when they end inside the chunk they start in. Delivering them then sends no
  /// reader to the cache (`bufferStart` stays), where they may not be yet: a reader takes them from memory.
  static func mayDeliverWhileWriting(from start: Int64, count: Int, chunkSize: Int) -> Bool {
    let size = Int64(chunkSize)
    return size > 0 && (start + Int64(count)) / size == start / size
  }

  /// `mayDeliverWhileWriting(from:count:chunkSize:)` for `pieces` (false when there are none).
  static func mayDeliverWhileWriting(_ pieces: [ByteBuffer], from start: Int64, chunkSize: Int) -> Bool {
    let count = pieces.reduce(0) { $0 + $1.readableBytes }
    return count > 0 && mayDeliverWhileWriting(from: start, count: count, chunkSize: chunkSize)
  }

  /// As `deliver`, for bytes the writer writes now (`mayDeliverWhileWriting`): they count as unwritten until
  /// `wroteDeliveredBytes`, and a reader that has reached its range's end waits for that before it leaves.
  mutating func deliverWhileWriting(
    _ pieces: [ByteBuffer], at offset: Int64, version: UInt32, now: ContinuousClock.Instant
  ) -> [FlightAction] {
    let newEnd = pieces.reduce(offset) { $0 + Int64($1.readableBytes) }
    if newEnd > received {
      if unwrittenEnd == nil { unwrittenStart = max(offset, received) }
      unwrittenEnd = newEnd
      unwrittenVersion = version
    }
    return deliver(pieces, at: offset, version: version, now: now)
  }

  /// The bytes delivered while they are written whose write is not over yet (nil: none), and the object
  /// version they are written under: this process has them, the cache does not list them yet.
  var bytesBeingWritten: BytesAtHand.InFlight? {
    unwrittenEnd.map { (unwrittenStart..<$0, unwrittenVersion) }
  }

  /// The write of the bytes `deliverWhileWriting` delivered is over (done, or failed: then the request fails).
  mutating func wroteDeliveredBytes() -> [FlightAction] {
    guard unwrittenEnd != nil else { return [] }
    unwrittenEnd = nil
    return [.wake]
  }

  private mutating func deliver(_ bytes: ByteBuffer, at offset: Int64) {
    let newEnd = offset + Int64(bytes.readableBytes)
    guard newEnd > received else { return }
    var fresh = bytes
    fresh.moveReaderIndex(forwardBy: Int(max(offset, received) - offset))
    received = newEnd
    let chunkStart = (received / chunkSize) * chunkSize
    if chunkStart > bufferStart {
      // The earlier chunks are complete in the cache; keep only the incomplete one.
      bufferStart = max(chunkStart, start)
      fresh.moveReaderIndex(forwardBy: fresh.readableBytes - Int(received - bufferStart))
      parts = fresh.readableBytes > 0 ? [fresh] : []
    } else if fresh.readableBytes > 0 {
      parts.append(fresh)
    }
  }

  /// The request ended (the first outcome counts). After a success the incomplete chunk's bytes stay for the
  /// readers still attached: a reader woken by the last bytes often runs only after the request has ended (a
  /// small range's whole body arrives at once), and it takes them from memory instead of reading back from the
  /// cache what was written a moment ago (at most a chunk, let go with the flight when its last reader leaves).
  /// After a failure, or with no reader left, memory is let go: what arrived is read from the cache (or
  /// fetched again: bytes delivered while written whose write failed).
  mutating func finish(_ result: Result<Void, any Error>) -> [FlightAction] {
    if outcome == nil { outcome = result }
    if case .success = outcome, readers > 0 { return [.wake] }
    dropParts()
    return [.wake]
  }

  /// A reader found the object at version `version`: bytes held of another version are let go, so that no
  /// reader gets them and none joins the flight for them (`canServe` needs a position at `bufferStart` or
  /// after). Bytes that arrive later come with their own version.
  mutating func discardBytes(unlessOf version: UInt32) -> [FlightAction] {
    guard let held = bytesVersion, held != version else { return [] }
    dropParts()
    return [.wake]
  }

  private mutating func dropParts() {
    parts = []
    bufferStart = received
  }

  // MARK: Origin requests

  /// What the fetching task does once an origin request of the flight has ended without error.
  enum AfterRequest: Equatable {
    /// Ask the origin for the next window now.
    case request
    /// Wait until a reader gets nearer (or leaves).
    case wait
    /// The flight is done.
    case stop
  }

  /// How far ahead of its furthest reader the flight keeps bytes requested: `window`, plus an eighth of what
  /// its readers have consumed.
  private var lead: Int64 { max(window, (demand - start) / 8) }

  /// The end of the next origin request: `lead` past the furthest reader (or past what arrived), at most
  /// `end`; nil (or `end`) when the flight is not windowed.
  func nextRequestEnd() -> Int64? {
    guard window > 0 else { return end }
    let requestEnd = max(received, demand) + lead
    return end.map { min($0, requestEnd) } ?? requestEnd
  }

  /// After a request ended: the next one now, later, or none (`objectLength`: the length, once known).
  func afterRequest(objectLength: Int64?) -> AfterRequest {
    guard isLive, received < min(end ?? .max, objectLength ?? .max) else { return .stop }
    guard window > 0 else { return .request }
    guard readers > 0, abandonedEnd == nil else { return .stop }
    return demand + lead / 2 >= received ? .request : .wait
  }

  /// A reader that waits for the whole run rather than reading it (a prefetch) joined: no more windows.
  mutating func dropWindow() -> [FlightAction] {
    window = 0
    return [.wake]
  }

  /// A reader asked for `position`: the flight's demand moves there if that is further.
  mutating func noteDemand(_ position: Int64) -> Bool {
    guard position > demand else { return false }
    demand = position
    return true
  }
}
