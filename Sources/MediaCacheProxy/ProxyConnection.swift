import Foundation
import HTTPTypes
import MediaCache
import MediaCacheHTTP
import NIOCore
import NIOHTTP1
import Synchronization

// The proxy's HTTP/1.1 server, on SwiftNIO directly. A request's head and end arrive on the connection's event
// loop; one task answers it and writes the response back through the channel. Nothing else sits between the
// socket and the responder: a cache hit costs one hop to Swift's pool and one back to the loop. (Hummingbird,
// used before, routes every connection through an async channel and a task per connection, and in the same
// run answered a static 64 KiB body 2.7 times as slowly as nginx: docs/PERFORMANCE.md.)

/// The last handler of a connection's pipeline (after NIO's HTTP/1 codec, pipelining and error handlers):
/// starts a task per request and closes connections that stay without a complete request head for the
/// client timeout, whether idle between requests or sending their head slowly. A response being written is
/// never cut by the timeout.
final class ProxyConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  private let responder: ProxyResponder
  private let clientTimeout: TimeAmount
  private let connections: ProxyConnections
  /// Whether this connection's loop answers hits itself now (nil: never).
  private let loopHits: LoopHitPolicy?
  private var head: HTTPRequestHead?
  /// The body of the request being read, when it is kept (see `ProxyRequest.body`).
  private var body = ByteBuffer()
  private var bodyTooLarge = false
  /// When the connection counts as idle and closes, while it waits for a request's parts (nil: it does not).
  private var idleDeadline: NIODeadline?
  /// The timer that checks `idleDeadline`: one per connection, moved on only when it fires early, so a request
  /// costs no timer of its own (scheduling and cancelling one per request part was 4% of a 64 KiB hit's CPU).
  private var idleTimer: Scheduled<Void>?
  private var responding: Task<Void, Never>?
  /// Responses answered on the loop (`ProxyResponder.hitNow`) not yet wholly written.
  private var answeringOnLoop = 0
  /// Requests answered on this connection so far: a response that ends re-arms the timer only if it is the
  /// latest (NIO's pipelining handler may hand over the next request before the previous end completes).
  private var requestCount = 0
  /// The proxy is stopping: close after the response in progress.
  private var quiescing = false
  /// A response that ends the connection was started (the request asked for it, or the body ends with the
  /// connection): a request pipelined after it is not answered. (NIO's pipelining handler hands the next
  /// request over once a response's end is written, whatever the response said: answered, it would go out
  /// after a body that the connection's end delimits, as part of that body.)
  private var closing = false
  /// Responses started and not yet ended on this connection (a response cut short closes the connection).
  private var responsesInFlight = 0
  /// A complete request not answered yet because the socket was full when it came (NIO's pipelining handler
  /// hands the next request over as soon as the last response's end is written, not once the client read it):
  /// answered once the channel is writable again, so that a client that pipelines requests and reads nothing
  /// makes the proxy queue no more than NIO's high-water mark and one response.
  private var parked: (head: HTTPRequestHead, request: ProxyRequest)?

  init(
    responder: ProxyResponder, clientTimeout: TimeAmount, connections: ProxyConnections,
    loopHits: LoopHitPolicy?
  ) {
    self.responder = responder
    self.clientTimeout = clientTimeout
    self.connections = connections
    self.loopHits = loopHits
  }

  func handlerAdded(context: ChannelHandlerContext) {
    loopHits?.opened()
    if context.channel.isActive { armIdleTimer(context) }
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    loopHits?.closed()
  }

  func channelActive(context: ChannelHandlerContext) {
    armIdleTimer(context)
    context.fireChannelActive()
  }

  func channelInactive(context: ChannelHandlerContext) {
    parked = nil
    idleDeadline = nil
    idleTimer?.cancel()
    idleTimer = nil
    responding?.cancel()
    responding = nil
    context.fireChannelInactive()
  }

  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    context.close(promise: nil)
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let head):
      // The timer restarts on each part of a request and stops once the request is complete: a client that
      // sends a head (or a body) and then nothing is closed like an idle one.
      self.head = head
      armIdleTimer(context)
      if !closing, !quiescing, ProxyRequest.expectsContinue(head) {
        let interim = HTTPResponseHead(version: head.version, status: .continue)
        context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
      }
    case .body(let part):
      armIdleTimer(context)
      // GET and HEAD bodies mean nothing here; another method's is kept up to its bound (`PUT /preload`).
      if let head, head.method != .GET, head.method != .HEAD {
        if body.readableBytes + part.readableBytes <= ProxyRequest.maxBodyBytes {
          body.writeImmutableBuffer(part)
        } else {
          bodyTooLarge = true
        }
      }
    case .end:
      idleDeadline = nil
      guard let head else { return }
      self.head = nil
      // A GET of a target this loop resolved before, as it may be answered at once: decided from NIO's head
      // (`ProxyResponder.hitNow(_:targets:)`), before a `ProxyRequest` is made. (A GET's body is never kept.)
      var askingLoop = true
      if !closing, !quiescing, body.readableBytes == 0, !bodyTooLarge, context.channel.isWritable,
        let loopHits, loopHits.answersHits, !responder.server.accessLog.isOn
      {
        switch responder.hitNow(head, targets: loopHits.targets) {
        case .answered(let hit):
          let (number, bound) = startResponse(to: head, context)
          writeLoopHit(
            hit, head: head, number: number, bound: bound, logged: nil, loopHits: loopHits, context)
          return
        case .declined: askingLoop = false
        case .undecided: break
        }
      }
      var request = ProxyRequest(head: head)
      (request.body, request.bodyTooLarge) = (body, bodyTooLarge)
      (body, bodyTooLarge) = (ByteBuffer(), false)
      // After a response that ends the connection, or while the proxy stops with a response in progress: not
      // answered (that response's end closes the connection). While the proxy stops with none in progress (a
      // request whose body was still coming when it began to stop), it is answered, and the connection closes
      // after it.
      if closing || (quiescing && responsesInFlight > 0) { return }
      guard context.channel.isWritable else {
        parked = (head, request)
        return
      }
      respond(to: head, request, context, askingLoop: askingLoop)
    }
  }

  func channelWritabilityChanged(context: ChannelHandlerContext) {
    if context.channel.isWritable, let (head, request) = parked.take(), !closing,
      !(quiescing && responsesInFlight > 0)
    {
      respond(to: head, request, context)
    }
    context.fireChannelWritabilityChanged()
  }

  func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
    guard event is ProxyQuiesceEvent else {
      context.fireUserInboundEventTriggered(event)
      return
    }
    // The proxy is stopping: an idle connection closes now, one with a response in progress once all of that
    // response has reached the socket (NIO's own quiescing would close once the end is handed over, dropping
    // what still waits in NIO's queue).
    quiescing = true
    if responding == nil && answeringOnLoop == 0 && head == nil { context.close(promise: nil) }
  }

  /// Closes the connection once `clientTimeout` passes without a call of this or a complete request.
  private func armIdleTimer(_ context: ChannelHandlerContext) {
    let deadline = NIODeadline.now() + clientTimeout
    idleDeadline = deadline
    if idleTimer == nil { scheduleIdleCheck(at: deadline, context) }
  }

  /// The timer's check: close if the deadline has passed, wait on if it moved, stop if there is none.
  private func scheduleIdleCheck(at deadline: NIODeadline, _ context: ChannelHandlerContext) {
    let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
    idleTimer = context.eventLoop.scheduleTask(deadline: deadline) {
      let (handler, context) = bound.value
      handler.idleTimer = nil
      guard let deadline = handler.idleDeadline else { return }
      if deadline <= .now() {
        context.close(promise: nil)
      } else {
        handler.scheduleIdleCheck(at: deadline, context)
      }
    }
  }

  /// Counts a response started on this connection; returns its number and what its end needs.
  private func startResponse(to head: HTTPRequestHead, _ context: ChannelHandlerContext) -> (
    number: Int, bound: NIOLoopBound<ResponseEnd>
  ) {
    if !head.isKeepAlive { closing = true }
    responsesInFlight += 1
    requestCount += 1
    connections.responseStarted()
    return (
      requestCount, NIOLoopBound(ResponseEnd(handler: self, context: context), eventLoop: context.eventLoop)
    )
  }

  /// Answers `request`: on the loop if it is a hit the loop may answer now (unless `askingLoop` is false: the
  /// loop already declined it), else in a task.
  private func respond(
    to head: HTTPRequestHead, _ request: ProxyRequest, _ context: ChannelHandlerContext,
    askingLoop: Bool = true
  ) {
    let (number, bound) = startResponse(to: head, context)
    let logged = responder.server.accessLog.isOn ? LoggedRequest(request) : nil
    var request = request
    if let loopHits { request.resolvedTarget = responder.resolvedTarget(of: request, in: loopHits.targets) }
    if askingLoop, let loopHits, loopHits.answersHits,
      let hit = responder.hitNow(request, targets: loopHits.targets)
    {
      writeLoopHit(hit, head: head, number: number, bound: bound, logged: logged, loopHits: loopHits, context)
      return
    }
    startTask(request, head: head, number: number, bound: bound, logged: logged)
  }

  /// Writes a hit answered on the loop: a hit whose pages are in memory, with no task and no hop between
  /// threads, written straight to the pipeline (head, body and end, one flush) with one promise for all of
  /// it. Its head is the one the loop kept for the object's hits, if it did (`LoopHitHeads`), with the range's
  /// fields and `Connection` added (`hitHead`).
  private func writeLoopHit(
    _ hit: LoopHit, head: HTTPRequestHead, number: Int, bound: NIOLoopBound<ResponseEnd>,
    logged: LoggedRequest?, loopHits: LoopHitPolicy, _ context: ChannelHandlerContext
  ) {
    let responder = self.responder
    let connections = self.connections
    let keepAlive = head.isKeepAlive
    let version = head.version
    let key = LoopHitHeads.Key(
      objectID: hit.cached.objectID, partial: hit.partial, versionMajor: version.major,
      versionMinor: version.minor)
    let source = LoopHitHeads.Source(hit.cached, second: HTTPDate.currentSecond)
    let range = hit.cached.range
    let responseHead = loopHits.heads.head(for: key, range: range, keepAlive: keepAlive, from: source) {
      let fields = responder.hitHeadersBeforeBody(hit.cached)
      return Self.responseHead(status: hit.status, headers: fields, version: version, extraCapacity: 3)
    } complete: { template in
      Self.hitHead(
        template, range: range, length: hit.cached.length, partial: hit.partial, version: version,
        keepAlive: keepAlive)
    }
    // The closures below hold none of the buffer: it goes back to the pool from `ReturningBuffer` alone.
    let status = hit.status
    let bytes = hit.cached.buffer.readableBytes
    let record = logged.map { _ in AccessRecord(hit.cached) }  // for the access log only
    let returning = ReturningBuffer(hit.cached.buffer)
    let written = context.eventLoop.makePromise(of: Void.self)
    context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
    context.write(wrapOutboundOut(.body(.byteBuffer(hit.cached.buffer))), promise: nil)
    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
    // Counted now that the response is the socket's (or NIO's queue's), in this turn of the loop: off the
    // hit's time to first byte (`ProxyMetrics.countsSettled()` waits for this turn).
    responder.countLoopHit(hit)
    answeringOnLoop += 1
    let queued = responder.server.queuedBytes
    queued.add(bytes)
    written.futureResult.whenComplete { result in
      // At once, not on the loop's next turn as `ProxyBodyWriter.writeNow` does: a loop answering hits as fast
      // as it can would queue a task per hit, each holding its buffer (measured: the peak RSS of the serving
      // rounds went from 56-60 to 106-112 MiB).
      if let buffer = returning.take() {
        HitBody.sent(buffer, hold: nil, reader: responder.reader, metrics: responder.metrics)
      }
      queued.remove(bytes)
      logged?.write(to: responder.server.accessLog, status: status, bytes: bytes, record: record)
      bound.value.handler.answeringOnLoop -= 1
      bound.value.handler.responseEnded(
        bound.value.context, request: number, keepAlive: keepAlive, written: result)
      connections.responseEnded()
    }
  }

  /// Answers `request` in a task (see `answer`).
  private func startTask(
    _ request: ProxyRequest, head: HTTPRequestHead, number: Int, bound: NIOLoopBound<ResponseEnd>,
    logged: LoggedRequest?
  ) {
    let channel = bound.value.context.channel
    let responder = self.responder
    let connections = self.connections
    // The task runs on the I/O executor: a hit's reads of the cache are made inline on its thread, not handed
    // from Swift's pool to an I/O thread and back (two thread wake-ups per piece).
    // Called, before the head is written, when the response ends the connection after all (a body of unknown
    // length to an HTTP/1.0 client): on the loop, so before the head and the end it writes afterwards.
    let endsConnection: @Sendable () -> Void = {
      channel.eventLoop.execute { bound.value.handler.closing = true }
    }
    responding = Task(executorPreference: IOExecutor.shared) {
      let answered = await ProxyConnectionHandler.answer(
        request, version: head.version, keepAlive: head.isKeepAlive, responder: responder,
        channel: channel, endsConnection: endsConnection, logged: logged)
      guard let (written, keepAlive, response, writer) = answered else {
        // Cancelled (the client left or the proxy is stopping), or cut (logged: `ProxyResponder.noteCut`).
        channel.close(promise: nil)
        connections.responseEnded()
        return
      }
      written.hop(to: channel.eventLoop).whenComplete { result in
        logged?.write(to: responder.server.accessLog, response, bytes: writer.bodyBytes)
        bound.value.handler.responseEnded(
          bound.value.context, request: number, keepAlive: keepAlive, written: result)
        connections.responseEnded()
      }
    }
  }

  private struct ResponseEnd {
    let handler: ProxyConnectionHandler
    let context: ChannelHandlerContext
  }

  /// Answers one request; returns the future of its last write and whether the connection stays open after
  /// it, or nil if the connection must be cut.
  private static func answer(
    _ request: ProxyRequest, version: HTTPVersion, keepAlive: Bool, responder: ProxyResponder,
    channel: any Channel, endsConnection: @escaping @Sendable () -> Void, logged: LoggedRequest?
  ) async -> (EventLoopFuture<Void>, keepAlive: Bool, ProxyResponse, ProxyBodyWriter)? {
    // The player's own fields the proxy passes on (`--forward-header`), for every origin request answering
    // this one: its head and its body's.
    // And a count of those requests when the access log is on (`AccessRecord` takes it).
    let counter = responder.server.accessLog.isOn ? OriginRequestCounter() : nil
    return await OriginClient.$requestCounter.withValue(counter) {
      await OriginClient.$forwardedHeaders.withValue(responder.forwardedHeaders(of: request)) {
        await answerForwarding(
          request, version: version, keepAlive: keepAlive, responder: responder, channel: channel,
          endsConnection: endsConnection, logged: logged)
      }
    }
  }

  private static func answerForwarding(
    _ request: ProxyRequest, version: HTTPVersion, keepAlive: Bool, responder: ProxyResponder,
    channel: any Channel, endsConnection: @Sendable () -> Void, logged: LoggedRequest?
  ) async -> (EventLoopFuture<Void>, keepAlive: Bool, ProxyResponse, ProxyBodyWriter)? {
    var response: ProxyResponse
    do {
      response = try await responder.respond(to: request)
    } catch {
      return nil
    }
    var keepAlive = keepAlive
    if case .stream = response.body, version.major == 1, version.minor == 0,
      response.headers[.contentLength] == nil
    {
      // HTTP/1.0 has no chunked encoding: a body of unknown length ends with the connection.
      keepAlive = false
      endsConnection()
    }
    let writer = ProxyBodyWriter(
      channel: channel, head: responseHead(response, version: version, keepAlive: keepAlive),
      queued: responder.server.queuedBytes)
    do {
      switch response.body {
      case .empty: break
      case .bytes(let buffer): try await writer.write(buffer, endingResponse: true)
      case .stream(let write): try await write(writer)
      case .hit(let body): body.send(through: writer)
      }
    } catch {
      responder.noteCut(
        error, path: request.path, response: response, writer: writer, logged: logged)
      return nil
    }
    // A hit's buffer is NIO's now, and its pool's once written: the response kept for the access log does not
    // hold it (held, the pool's next read into it would copy it to a new allocation).
    if case .hit = response.body { response.body = .empty }
    return (writer.finish(), keepAlive, response, writer)
  }

  private func responseEnded(
    _ context: ChannelHandlerContext, request number: Int, keepAlive: Bool, written: Result<Void, any Error>
  ) {
    responsesInFlight -= 1
    guard case .success = written, keepAlive, !quiescing, context.channel.isActive else {
      context.close(promise: nil)
      return
    }
    // A later request already arrived (being read, waiting for the socket, or answered): the connection is not
    // idle.
    guard number == requestCount, head == nil, parked == nil else { return }
    responding = nil
    armIdleTimer(context)
  }
}

/// Sent through a connection's pipeline when the proxy stops (see `ProxyConnectionHandler`).
struct ProxyQuiesceEvent: Sendable {}
