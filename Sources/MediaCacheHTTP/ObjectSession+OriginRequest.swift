import AsyncHTTPClient
import Foundation
import MediaCache
import NIOCore
import NIOHTTP1

/// One origin request of a flight on its way: AsyncHTTPClient's task, the delegate writing the response into
/// the cache and handing it to the flight, and the future that completes once the delegate has handed over
/// all it wrote (`ObjectSession.follow`).
struct OriginRequest: Sendable {
  let task: HTTPClient.Task<Void>
  let writer: BodyWriter
  let handedOver: EventLoopFuture<Void>
}

/// A new flight's first origin request, sent by the reader that made the flight, with the scheduler's slot it
/// holds and when it was sent (`ObjectSession.sendFirstRequest`).
struct FirstRequest: Sendable {
  let slot: ReadPriority
  let started: ContinuousClock.Instant
  let request: OriginRequest
}

extension ObjectSession {
  /// Sends one origin request for the flight's bytes from `position` to `end` (nil: none to send).
  func sendRequest(_ flight: Flight, from position: Int64, to end: Int64?, isLastAttempt: Bool) throws
    -> OriginRequest?
  {
    if let end, position >= end { return nil }
    let stored = manager.manifest
    // A weak entity tag may not be used in If-Range (RFC 9110 13.1.5): fall back to Last-Modified. A changed
    // ETag in the answer is still detected (`reconcile`, from the writer's head check).
    let strongTag = stored.etag.flatMap { $0.hasPrefix("W/") ? nil : $0 }
    let validator = strongTag ?? stored.lastModified
    let fields = environment.client.requestHeaders(for: url, start: position, end: end, ifRange: validator)
    let writer = BodyWriter(
      session: self, flight: flight, url: url, start: position, end: end, stored: stored,
      sharedWithCredentials: fields.sharedWithCredentials, forwarded: fields.forwarded,
      isLastAttempt: isLastAttempt)
    var headers = HTTPHeaders()
    for (name, value) in fields.headers { headers.add(name: name, value: value) }
    let prepared = try HTTPClient.Request(url: url, method: .GET, headers: headers)
    let task = environment.client.http.execute(request: prepared, delegate: writer)
    // However the request ends (some failures, such as too many redirects, never reach the delegate), the
    // hand-over ends with it, once a part still being written is handed over.
    let handedOver = task.eventLoop.makePromise(of: Void.self)
    task.futureResult.whenComplete { _ in writer.afterWrites { handedOver.succeed() } }
    // An origin that trickles its head (each byte within the idle timeout) is given up on after `headTimeout`.
    // The delegate runs on the task's event loop, so `writer.head` is read there.
    let headTimedOut = environment.client.headTimedOut(url)
    let headTimer = task.eventLoop.scheduleTask(deadline: environment.client.headDeadline) {
      if let refusal = writer.refusal {
        // A status's answer not read whole by then is not kept: the status alone is the error.
        task.fail(reason: refusal.error)
      } else if writer.head == nil {
        task.fail(reason: headTimedOut)
      }
    }
    task.futureResult.whenComplete { [outages = environment.outages, url] _ in
      headTimer.cancel()
      // The origin answered (a head the cache took, or a status other than 5xx): an outage of it has ended.
      if writer.head != nil || writer.refusal.map({ $0.answer.status < 500 }) == true {
        outages.noteAnswer(url)
      }
    }
    return OriginRequest(task: task, writer: writer, handedOver: handedOver.futureResult)
  }

  /// Waits until the request has ended and its delegate has handed the flight all it wrote; throws what it
  /// failed with.
  func follow(_ request: OriginRequest, of flight: Flight) async throws {
    let (task, writer) = (request.task, request.writer)
    await withTaskCancellationHandler {
      try? await request.handedOver.get()
    } onCancel: {
      task.cancel()
    }
    do {
      try await task.futureResult.get()
    } catch is BodyWriter.StopReading {
    } catch {
      // The cache refused the response (its head or a write): that is the error, not the cut it caused.
      if let refused = writer.writeError { throw await environment.client.describe(refused, url: url) }
      let mapped = await environment.client.describe(error, url: url)
      try Task.checkCancellation()
      // A status the cache does not store is the failure, whatever cut its answer's body short (then the
      // answer is not kept).
      if let refusal = writer.refusal {
        throw (mapped as? OriginError)?.answer != nil ? mapped : refusal.error
      }
      if let head = writer.head, let expected = head.expectedBodyLength, mapped is OriginError,
        writer.bodyBytes < expected
      {
        // The connection broke mid-body: retryable, resuming at the first byte not received.
        throw OriginError.truncatedBody(
          url: url, expected: head.start + expected, received: writer.offset, attempts: 1)
      }
      throw mapped
    }
    // A write that failed after the last body part arrived (the request itself succeeded).
    if let error = writer.writeError { throw await environment.client.describe(error, url: url) }
    guard let head = writer.head else {
      throw OriginError.inconsistentResponse(url: url, reason: "no response")
    }
    if let expected = head.expectedBodyLength, writer.bodyBytes < expected, !writer.stoppedAtEnd {
      let flightEnd = flight.end
      if flightEnd.map({ writer.offset < $0 }) ?? true {
        throw OriginError.truncatedBody(
          url: url, expected: head.start + expected, received: writer.offset, attempts: 1)
      }
    }
    if head.metadata.length == nil && !head.isPartial {
      // A body without a declared length (chunked): its end is the object's end.
      let length = writer.offset
      let tag = writer.versionTag
      try await IOExecutor.shared.run { [manager] in try manager.setContentLength(length, ifVersion: tag) }
    }
  }
}
