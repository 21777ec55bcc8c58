import AsyncHTTPClient
import Foundation
import MediaCache
import NIOCore
import NIOHTTP1

/// Receives one origin response on its event loop: checks the head, writes every body part to the cache right
/// there (no task switch per part; the data manager is thread-safe), and hands bytes to the flight's readers
/// in batches, at once when a reader is waiting.
final class BodyWriter: HTTPClientResponseDelegate, @unchecked Sendable {
  // Mutable state is touched only on the request's event loop (AsyncHTTPClient calls the delegate there);
  // it is read by the fetching task only after the task's future completed, which orders the accesses.
  typealias Response = Void

  /// What the fetching task learns, in order.
  enum Event: Sendable {
    case head(ResponseHead)
    case bytes([ByteBuffer], at: Int64)
    /// Bytes up to this offset are in the cache but were not handed over (see `Flight.queuedBytes`).
    case skipped(upTo: Int64)
  }

  private let session: ObjectSession
  private let flight: Flight
  private let url: String
  private let requestedStart: Int64
  private let requestedEnd: Int64?
  private let stored: Manifest
  private let events: AsyncStream<Event>.Continuation

  private(set) var head: ResponseHead?
  private(set) var offset: Int64 = 0
  private(set) var bodyBytes: Int64 = 0
  private(set) var stoppedAtEnd = false
  private var versionTag: UInt32 = 0
  private var pending: [ByteBuffer] = []
  private var pendingOffset: Int64 = 0
  private var pendingBytes = 0
  /// Hands `pending` over `maxBatchDelay` after its first bytes arrived, if nothing did sooner.
  private var batchTimer: Scheduled<Void>?
  /// Whether this response's bytes were handed over yet.
  private var handedOver = false

  init(
    session: ObjectSession, flight: Flight, url: String, start: Int64, end: Int64?, stored: Manifest,
    events: AsyncStream<Event>.Continuation
  ) {
    self.session = session
    self.flight = flight
    self.url = url
    self.requestedStart = start
    self.requestedEnd = end
    self.stored = stored
    self.events = events
  }

  /// Ends a body early once the flight's run is complete (the error is not reported as a failure).
  struct StopReading: Error {}

  /// Bytes freed at least when a write finds the disk full (so a stream does not run a pass per chunk).
  static let roomAfterNoSpace: Int64 = 64 << 20
  /// The longest bytes wait here for more to batch with.
  static let maxBatchDelay = TimeAmount.milliseconds(5)

  func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
    do {
      try session.checkDeclaredLength(status: head.status, headers: head.headers, stored: stored)
      let parsed = try OriginClient.interpret(
        status: head.status, headers: head.headers, url: url, start: requestedStart, end: requestedEnd)
      versionTag = try session.reconcile(parsed, stored: stored)
      self.head = parsed
      offset = parsed.start
      events.yield(.head(parsed))
      return task.eventLoop.makeSucceededVoidFuture()
    } catch {
      return task.eventLoop.makeFailedFuture(error)
    }
  }

  func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
    var buffer = buffer
    var overlong = false
    if let expected = head?.expectedBodyLength, bodyBytes + Int64(buffer.readableBytes) > expected {
      // More body than Content-Length or Content-Range says (a body framed by the connection's close): the
      // bytes past the end are not the object's; what is within goes to the cache, then the request fails.
      let within = Int(max(0, expected - bodyBytes))
      buffer = buffer.getSlice(at: buffer.readerIndex, length: within) ?? ByteBuffer()
      overlong = true
    }
    let count = buffer.readableBytes
    do {
      let at = offset
      let tag = versionTag
      try buffer.withUnsafeReadableBytes { raw in
        do {
          do {
            try session.manager.write(raw, at: at, ifVersion: tag)
          } catch let error as StoreError {
            // A full disk, and the app set limits: evict as the limits would (least recently used, never an
            // object in use), then try once more; without limits, or if nothing could go, ENOSPC stands.
            guard case .io(_, _, .noSpace) = error else { throw error }
            let room = max(Self.roomAfterNoSpace, 16 * Int64(session.manager.manifest.chunkSize))
            guard ((try? session.reader.cache.makeRoom(for: room)) ?? 0) > 0 else { throw error }
            try session.manager.write(raw, at: at, ifVersion: tag)
          }
        } catch StoreError.outOfBounds {
          throw OriginError.inconsistentResponse(
            url: url, reason: "body runs past the length the origin declared")
        }
      }
    } catch {
      return task.eventLoop.makeFailedFuture(error)
    }
    flight.writtenHint.store(offset + Int64(count), ordering: .relaxed)
    if pending.isEmpty { pendingOffset = offset }
    pending.append(buffer)
    pendingBytes += count
    offset += Int64(count)
    bodyBytes += Int64(count)
    // Bytes go to the readers in batches while none waits for them (fewer hops), but never later than
    // `maxBatchDelay` (a reader may start waiting after the last piece came, and the origin may pause), and
    // the response's first bytes at once: the player whose request started the flight is about to wait for
    // them (its response head is on its way) and has not said so yet. Without that, a paced origin's first
    // bytes sat here until the next piece arrived.
    if pendingBytes >= 256 << 10 || flight.blockedReaders.load(ordering: .relaxed) > 0 || !handedOver {
      flush()
    } else if batchTimer == nil {
      batchTimer = task.eventLoop.scheduleTask(in: Self.maxBatchDelay) {
        self.batchTimer = nil
        self.flush()
      }
    }
    if overlong {
      flush()
      return task.eventLoop.makeFailedFuture(
        OriginError.inconsistentResponse(
          url: url,
          reason:
            "body is longer than the \(head?.expectedBodyLength ?? 0) bytes its Content-Range or Content-Length says"
        ))
    }
    var flightEnd = flight.endHint.load(ordering: .relaxed)
    // An abandoned flight whose grace is over stops at the end of the chunk these bytes are in, as
    // `Flight.endGrace` would have it, even if the flight's task has not run yet (a busy cooperative pool):
    // meanwhile this loop would fetch on to the whole read-ahead bound.
    let graceEnd = flight.graceDeadline.load(ordering: .relaxed)
    if graceEnd > 0, NIODeadline.now().uptimeNanoseconds >= graceEnd {
      let chunkSize = flight.chunkSize
      let settled = max(((offset + chunkSize - 1) / chunkSize) * chunkSize, flight.start + chunkSize)
      flightEnd = flightEnd >= 0 ? min(flightEnd, settled) : settled
    }
    // A 206 stops at the run's end; so does a 200 of known length that answers a request for the whole object
    // (no Range sent). A 200 to a Range request (an origin that ignores Range) goes on: another request would
    // get the same body from byte 0 again.
    let wholeObjectAsked = requestedStart == 0 && requestedEnd == nil && head?.metadata.length != nil
    if flightEnd >= 0, offset >= flightEnd, head?.isPartial == true || wholeObjectAsked {
      stoppedAtEnd = true
      flush()
      return task.eventLoop.makeFailedFuture(StopReading())
    }
    return task.eventLoop.makeSucceededVoidFuture()
  }

  func didFinishRequest(task: HTTPClient.Task<Void>) throws {
    flush()
    events.finish()
  }

  func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
    flush()  // what was written is valid; readers get it before the error
    events.finish()
  }

  private func flush() {
    batchTimer?.cancel()
    batchTimer = nil
    guard !pending.isEmpty else { return }
    if flight.queuedBytes.load(ordering: .relaxed) > Flight.maxQueuedBytes {
      events.yield(.skipped(upTo: pendingOffset + Int64(pendingBytes)))
    } else {
      flight.queuedBytes.add(pendingBytes, ordering: .relaxed)
      events.yield(.bytes(pending, at: pendingOffset))
    }
    pending = []
    pendingBytes = 0
    handedOver = true
  }
}
