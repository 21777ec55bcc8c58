import AsyncHTTPClient
import Foundation
import MediaCache
import NIOCore
import NIOHTTP1

/// Receives one origin response on its event loop: checks the head on the I/O executor, queues every body part
/// for the I/O executor to write to the cache (never on the event loop), and hands the bytes to the flight's
/// readers once written (the first ones as they are: `FlightState.deliverWhileWriting`), in batches, at once
/// when a reader is waiting: `Flight.deliver` from the loop (the head and the first bytes from the I/O thread
/// that checks and writes them), with no task between.
///
/// The queue is bounded (`maxQueuedBytes`): past it the next body part is not read until a write is done
/// (AsyncHTTPClient waits for the future `didReceiveBodyPart` returns), so a slow disk slows the origin
/// instead of growing memory. Below it, parts are taken at once: a connection that breaks leaves nothing
/// unread in AsyncHTTPClient's buffers (it drops them), so a retry resumes after every byte that arrived.
final class BodyWriter: HTTPClientResponseDelegate, @unchecked Sendable {
  // Mutable state is touched only on the request's event loop (AsyncHTTPClient calls the delegate there, and
  // write completions hop back to it); the fetching task reads it only after `OriginRequest.handedOver`
  // completed, which happens on the loop after the last write completed.
  typealias Response = Void

  let session: ObjectSession
  private let flight: Flight
  private let url: String
  private let requestedStart: Int64
  private let requestedEnd: Int64?
  let stored: Manifest

  private(set) var head: ResponseHead?
  /// A status the cache does not store, and the answer it came with, whose body is being read.
  private(set) var refusal: (error: OriginError, answer: OriginAnswer)?
  /// Ends the read of an answer's body that takes longer than `OriginAnswer.readTimeout`.
  private var answerTimer: Scheduled<Void>?
  /// The player's fields the request carries (recorded with an answer) and whether a 5xx will not be retried.
  private let answerForwarded: [OriginHeader]
  private let isLastAttempt: Bool
  /// Every body byte before this is written to the cache.
  private(set) var offset: Int64 = 0
  /// Body bytes received (written or queued).
  private(set) var bodyBytes: Int64 = 0
  private(set) var stoppedAtEnd = false
  /// Why a write failed: the response is given up on, and the fetching task reports this.
  private(set) var writeError: (any Error)?
  /// The object version the body is written under (`ObjectSession.reconcile`), once the head was checked.
  private(set) var versionTag: UInt32 = 0
  private var pending: [ByteBuffer] = []
  private var pendingOffset: Int64 = 0
  private var pendingBytes = 0
  /// Hands `pending` over `maxBatchDelay` after its first bytes arrived, if nothing did sooner.
  private var batchTimer: Scheduled<Void>?
  /// Whether this response's bytes were handed over yet.
  private var handedOver = false
  /// Body parts received and not yet handed to the executor, and their bytes (with the batch being written).
  private var queue: [ByteBuffer] = []
  private var queuedBytes = 0
  /// Where the next body part received goes.
  private var receivedOffset: Int64 = 0
  /// A batch is being written on the executor.
  private var writing = false
  /// While the head is checked: where body parts go for the head's job to write.
  private var headMailbox: HeadCheckMailbox?
  /// The head received, until its check is submitted (with the first body part, or `maxHeadCheckDelay` after
  /// it came), and the timer that submits it.
  private var uncheckedHead: (parsed: ResponseHead, head: HTTPResponseHead)?
  private var headCheckTimer: Scheduled<Void>?
  /// Completed when the queue is below its bound again (the origin's next body part is read then).
  private var roomPromise: EventLoopPromise<Void>?
  /// Run once nothing is queued or being written.
  private var drainWaiters: [() -> Void] = []
  /// The last chunk whose page cache a job readied for this response's writes (`chunkToPrepare(after:)`).
  var preparedChunk = -1

  /// Whether the response must allow a shared cache to store it (credentials were sent; `OriginClient`).
  private let sharedWithCredentials: Bool
  /// The player's fields the request forwarded (lowercased names): a `Vary` on one of them forbids storing.
  private let forwarded: Set<String>
  /// The URL of the latest response head AsyncHTTPClient received (`didVisitURL`): the request's, or where a
  /// redirect led; stored with the object when it is not `url` (`OriginClient.responseURLField`).
  var responseURL: String?

  init(
    session: ObjectSession, flight: Flight, url: String, start: Int64, end: Int64?, stored: Manifest,
    sharedWithCredentials: Bool, forwarded: Set<String> = [], isLastAttempt: Bool = true
  ) {
    self.answerForwarded = OriginClient.forwardedHeaders
    self.isLastAttempt = isLastAttempt
    self.sharedWithCredentials = sharedWithCredentials
    self.forwarded = forwarded
    self.session = session
    self.flight = flight
    self.url = url
    self.requestedStart = start
    self.requestedEnd = end
    self.stored = stored
  }

  func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
    let parsed: ResponseHead
    do {
      parsed = try OriginClient.interpret(
        status: head.status, headers: head.headers, url: url, start: requestedStart, end: requestedEnd,
        sharedWithCredentials: sharedWithCredentials, forwarded: forwarded, responseURL: responseURL,
        freshness: session.environment.client.configuration.freshness,
        sharedCache: session.environment.client.configuration.isSharedCache)
    } catch  where error.code == .httpStatus && (head.status.code < 500 || isLastAttempt) {
      // A status the cache does not store (a 5xx once it will not be retried): its body is read, bounded in size
      // and time, so that a proxy can relay the answer.
      refusal = (error, OriginAnswer(head, forwarded: answerForwarded))
      answerTimer = task.eventLoop.scheduleTask(in: OriginAnswer.readTimeout) { task.fail(reason: error) }
      return task.eventLoop.makeSucceededVoidFuture()
    } catch {
      // A length declared against the stored entity tag is checked even for a response refused for its range
      // (it may reset the object: on the executor).
      let promise = task.eventLoop.makePromise(of: Void.self)
      IOExecutor.shared.submit { [session, stored] in
        let check = Result {
          try session.checkDeclaredLength(status: head.status, headers: head.headers, stored: stored)
        }
        if case .failure(let declared) = check { promise.fail(declared) } else { promise.fail(error) }
      }
      return promise.futureResult
    }
    self.head = parsed
    offset = parsed.start
    receivedOffset = parsed.start
    // Checking the head against the manifest may commit it (new validators, a reset): on the executor, as the
    // first job of the write queue, with the first body part (waited for a moment) and the parts that come while
    // it runs (`HeadCheckMailbox`). The readers learn the head once the manifest says what it says.
    writing = true
    headMailbox = HeadCheckMailbox()
    uncheckedHead = (parsed, head)
    headCheckTimer = task.eventLoop.scheduleTask(in: Self.maxHeadCheckDelay) { self.checkHead(task: task) }
    return task.eventLoop.makeSucceededVoidFuture()
  }

  /// The longest a head's check waits for the first body part to be written with it.
  static let maxHeadCheckDelay = TimeAmount.milliseconds(1)

  /// Submits the check of the head received, if not done yet, with what its mailbox holds by then.
  private func checkHead(task: HTTPClient.Task<Void>) {
    headCheckTimer?.cancel()
    headCheckTimer = nil
    guard let (parsed, head) = uncheckedHead, let mailbox = headMailbox else { return }
    uncheckedHead = nil
    let prepare = chunkToPrepare(after: parsed.start, in: parsed)
    IOExecutor.shared.submit { [session, stored, url, flight] in
      let checked = Result { () throws -> UInt32 in
        try session.checkDeclaredLength(status: head.status, headers: head.headers, stored: stored)
        return try session.reconcile(parsed, stored: stored)
      }
      let batch = mailbox.close()
      // The head and the first bytes go to the readers from here (no hop to the loop, which hands over nothing
      // yet), the bytes before they are written when they end in the chunk they start in (`deliverWhileWriting`).
      let early =
        session.environment.earlyHandOver.isOn
        && FlightState.mayDeliverWhileWriting(batch, from: parsed.start, chunkSize: stored.chunkSize)
      if early, case .success(let tag) = checked {
        flight.setHead(parsed.metadata, deliveringWhileWriting: batch, at: parsed.start, version: tag)
      }
      let written = checked.flatMap { tag in
        Result {
          try Self.write(batch, at: parsed.start, ifVersion: tag, flight: flight, session: session, url: url)
        }
      }
      if early, case .success = checked {
        if case .failure(let error) = written { session.environment.earlyHandOver.writeFailed(error) }
        flight.wroteDeliveredBytes()
      } else if case .success(let tag) = checked {
        let delivered = if case .success = written { batch } else { [ByteBuffer]() }
        flight.setHead(parsed.metadata, delivering: delivered, at: parsed.start, version: tag)
      }
      task.eventLoop.execute { self.headChecked(checked, batch: batch, written: written, task: task) }
      if case .success = written, let prepare { session.manager.prepareForWriting(chunk: prepare) }
    }
  }

  /// The head's job is done (on the event loop): its batch, handed over and written by the job, is accounted
  /// for, and the parts queued meanwhile go in the next job.
  private func headChecked(
    _ checked: Result<UInt32, any Error>, batch: [ByteBuffer], written: Result<Void, any Error>,
    task: HTTPClient.Task<Void>
  ) {
    headMailbox = nil
    writing = false
    let count = batch.reduce(0) { $0 + $1.readableBytes }
    queuedBytes -= count
    switch (checked, written) {
    case (.success(let tag), .success):
      versionTag = tag
      offset += Int64(count)
      if count > 0 { handedOver = true }
      if !queue.isEmpty { writeQueue(task: task) }
    case (.failure(let error), _), (_, .failure(let error)):
      fail(error)
    }
    jobDone()
  }

  func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
    if let writeError { return task.eventLoop.makeFailedFuture(writeError) }
    if let (error, _) = refusal {
      // An answer's body past `OriginAnswer.maxBody` is not kept: the error alone ends the request.
      guard refusal?.answer.append(buffer) == true else { return task.eventLoop.makeFailedFuture(error) }
      return task.eventLoop.makeSucceededVoidFuture()
    }
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
    if count > 0 {
      if headMailbox?.offer(buffer) != true { queue.append(buffer) }
      queuedBytes += count
      receivedOffset += Int64(count)
      bodyBytes += Int64(count)
      ReaderMetrics.noteFetched(count)
      if !writing { writeQueue(task: task) }
    }
    if uncheckedHead != nil { checkHead(task: task) }
    if overlong {
      let reason =
        "body is longer than the \(head?.expectedBodyLength ?? 0) bytes its Content-Range or Content-Length says"
      return drained(task.eventLoop).flatMapThrowing { [url] in
        throw OriginError.inconsistentResponse(url: url, reason: reason)
      }
    }
    var flightEnd = flight.endHint.load(ordering: .relaxed)
    // An abandoned flight whose grace is over stops where these bytes end, as `Flight.endGrace` would have it,
    // even if the flight's task has not run yet (a busy cooperative pool): meanwhile this loop would fetch on
    // to the whole read-ahead bound.
    let graceEnd = flight.graceDeadline.load(ordering: .relaxed)
    if graceEnd > 0, NIODeadline.now().uptimeNanoseconds >= graceEnd {
      let settled = FlightState.settledEnd(arrived: receivedOffset)
      flightEnd = flightEnd >= 0 ? min(flightEnd, settled) : settled
    }
    // A 206 stops at the run's end; so does a 200 of known length that answers a request for the whole object
    // (no Range sent). A 200 to a Range request (an origin that ignores Range) goes on: another request would
    // get the same body from byte 0 again.
    let wholeObjectAsked = requestedStart == 0 && requestedEnd == nil && head?.metadata.length != nil
    if flightEnd >= 0, receivedOffset >= flightEnd, head?.isPartial == true || wholeObjectAsked {
      stoppedAtEnd = true
      return drained(task.eventLoop).flatMapThrowing { throw StopReading() }
    }
    // Background work past its rate reads its next part later (see `BackgroundRateLimit`), and not while a
    // player of this reader waits for an origin (a background flight has no player: one that joins promotes it).
    let background = flight.isBackground.load(ordering: .relaxed)
    let limit = background ? session.environment.backgroundRate : nil
    let delay = count > 0 ? limit?.delay(taking: count) ?? .zero : .zero
    let eventLoop = task.eventLoop
    let waits =
      background && session.environment.playerWaits.waited(within: Self.pauseLinger)
      ? session.environment.playerWaits : nil
    let flight = self.flight
    func paced(_ ready: EventLoopFuture<Void>) -> EventLoopFuture<Void> {
      var next = ready
      if delay != .zero { next = next.flatMap { eventLoop.scheduleTask(in: delay) {}.futureResult } }
      if let waits {
        next = next.flatMap {
          Self.whilePlayersWait(waits, flight: flight, on: eventLoop, until: .now() + Self.longestPause)
        }
      }
      return next
    }
    guard queuedBytes > Self.maxQueuedBytes else {
      if delay == .zero && waits == nil { return eventLoop.makeSucceededVoidFuture() }
      return paced(eventLoop.makeSucceededVoidFuture())
    }
    if roomPromise == nil { roomPromise = eventLoop.makePromise() }
    return paced(roomPromise!.futureResult)
  }

  /// Hands everything queued to the executor as one batch; when it is written, hands it to the readers (on
  /// the event loop) and starts the next batch.
  private func writeQueue(task: HTTPClient.Task<Void>) {
    let batch = queue
    let at = receivedOffset - Int64(queuedBytes)
    queue = []
    writing = true
    let prepare = head.flatMap { chunkToPrepare(after: receivedOffset, in: $0) }
    IOExecutor.shared.submit { [session, url, versionTag, flight] in
      let result = Result {
        try Self.write(batch, at: at, ifVersion: versionTag, flight: flight, session: session, url: url)
      }
      task.eventLoop.execute { self.batchWritten(batch, result, task: task) }
      if case .success = result, let prepare { session.manager.prepareForWriting(chunk: prepare) }
    }
  }

  private func batchWritten(
    _ batch: [ByteBuffer], _ result: Result<Void, any Error>, task: HTTPClient.Task<Void>
  ) {
    writing = false
    queuedBytes -= batch.reduce(0) { $0 + $1.readableBytes }
    switch result {
    case .success:
      for part in batch { written(part, task: task) }
      if !queue.isEmpty { writeQueue(task: task) }
    case .failure(let error):
      fail(error)
    }
    jobDone()
  }

  /// A job failed: the response is given up on (the next body part fails it; the fetching task reports it).
  private func fail(_ error: any Error) {
    writeError = error
    queue = []
    queuedBytes = 0
  }

  /// A job of the executor finished: lets the origin's next body part in if the queue has room, and runs what
  /// waited for the queue to drain.
  private func jobDone() {
    if queuedBytes <= Self.maxQueuedBytes, let promise = roomPromise {
      roomPromise = nil
      if let writeError { promise.fail(writeError) } else { promise.succeed() }
    }
    if !writing {
      let waiters = drainWaiters
      drainWaiters = []
      for waiter in waiters { waiter() }
    }
  }

  /// Completes once nothing is queued or being written: failed with the write error if there was one.
  private func drained(_ eventLoop: any EventLoop) -> EventLoopFuture<Void> {
    let promise = eventLoop.makePromise(of: Void.self)
    afterWrites { [self] in
      if let writeError { promise.fail(writeError) } else { promise.succeed() }
    }
    return promise.futureResult
  }

  /// Runs `body` on the event loop once nothing is queued or being written.
  func afterWrites(_ body: @escaping () -> Void) {
    if writing { drainWaiters.append(body) } else { body() }
  }

  /// A body part is in the cache (on the event loop): hands it to the readers.
  private func written(_ buffer: ByteBuffer, task: HTTPClient.Task<Void>) {
    let count = buffer.readableBytes
    if pending.isEmpty { pendingOffset = offset }
    pending.append(buffer)
    pendingBytes += count
    offset += Int64(count)
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
  }

  func didFinishRequest(task: HTTPClient.Task<Void>) throws {
    checkHead(task: task)
    afterWrites { self.flush() }
    answerTimer?.cancel()
    if let refusal {
      var error = refusal.error
      error.answer = refusal.answer
      throw error
    }
  }

  func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
    answerTimer?.cancel()
    checkHead(task: task)
    // What was written is valid: readers get it before the error, with what was still queued.
    afterWrites { self.flush() }
  }

  private func flush() {
    batchTimer?.cancel()
    batchTimer = nil
    guard !pending.isEmpty else { return }
    flight.deliver(pending, at: pendingOffset, version: versionTag)
    pending = []
    pendingBytes = 0
    handedOver = true
  }
}
