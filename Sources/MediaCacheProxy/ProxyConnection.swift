import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Synchronization

// The proxy's HTTP/1.1 server, on SwiftNIO directly. A request's head and end arrive on the connection's event
// loop; one task answers it and writes the response back through the channel. Nothing else sits between the
// socket and the responder: a cache hit costs one hop to Swift's pool and one back to the loop. (Hummingbird,
// used before, routes every connection through an async channel and a task per connection, and in the same
// run answered a static 64 KiB body 2.7 times as slowly as nginx: docs/PERFORMANCE.md.)

/// A request as the responder sees it.
struct ProxyRequest: Sendable {
  var method: HTTPMethod
  /// The target's path, before any `?` (not percent-decoded).
  var path: Substring
  /// The target's query, after the first `?`.
  var query: Substring?
  var headers: HTTPFields

  init(head: HTTPRequestHead) {
    method = head.method
    var target = Substring(head.uri)
    // An absolute-form target (`GET http://127.0.0.1:8089/metrics`, as sent to a proxy) names the path after
    // its authority.
    if let scheme = target.range(of: "://"), scheme.lowerBound > target.startIndex,
      target[..<scheme.lowerBound].allSatisfy(\.isLetter)
    {
      let authorityAndPath = target[scheme.upperBound...]
      target = authorityAndPath.firstIndex(of: "/").map { authorityAndPath[$0...] } ?? "/"
    }
    if let mark = target.firstIndex(of: "?") {
      path = target[..<mark]
      query = target[target.index(after: mark)...]
    } else {
      path = target
      query = nil
    }
    var fields = HTTPFields()
    fields.reserveCapacity(head.headers.count)
    for (name, value) in head.headers {
      if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
    }
    headers = fields
  }

  /// The first value of query parameter `name`, percent-decoded (kept as sent if it does not decode); nil
  /// when absent.
  func queryValue(_ name: String) -> String? {
    guard let query else { return nil }
    for pair in query.split(separator: "&") {
      let key = pair.prefix { $0 != "=" }
      guard key == name else { continue }
      let value = pair[key.endIndex...].dropFirst()
      return Self.percentDecoded(value) ?? String(value)
    }
    return nil
  }

  /// `%XX` escapes decoded; nil if an escape is malformed or the result is not UTF-8. The same as Foundation's
  /// `removingPercentEncoding` (tested), without its CFString round trip per call; text that is not all
  /// ASCII (rare in a request target) is left to Foundation.
  static func percentDecoded(_ text: Substring) -> String? {
    let utf8 = text.utf8
    guard utf8.contains(UInt8(ascii: "%")) else { return String(text) }
    guard utf8.allSatisfy({ $0 < 0x80 }) else { return text.removingPercentEncoding }
    func hexValue(_ byte: UInt8) -> UInt8? {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
      default: nil
      }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var index = utf8.startIndex
    while index != utf8.endIndex {
      let byte = utf8[index]
      utf8.formIndex(after: &index)
      guard byte == UInt8(ascii: "%") else {
        bytes.append(byte)
        continue
      }
      guard index != utf8.endIndex, let high = hexValue(utf8[index]) else { return nil }
      utf8.formIndex(after: &index)
      guard index != utf8.endIndex, let low = hexValue(utf8[index]) else { return nil }
      utf8.formIndex(after: &index)
      bytes.append(high << 4 | low)
    }
    return String(validating: bytes, as: UTF8.self)
  }
}

/// A response: status, headers and a body that is empty, in memory, or written by a closure.
struct ProxyResponse: Sendable {
  var status: HTTPResponse.Status
  var headers: HTTPFields
  var body: Body

  enum Body: Sendable {
    case empty
    case bytes(ByteBuffer)
    /// Writes the body through the writer; a throw cuts the connection (the status is already sent).
    case stream(@Sendable (ProxyBodyWriter) async throws -> Void)
  }
}

/// Writes one response to a channel, from the task answering it. The head goes out with the first body
/// bytes (one flush for both), and the end with the last ones when the body knows which they are. Once
/// `maxBytesInFlight` bytes wait in NIO, the next write waits for the oldest to reach the socket, so a slow
/// client sets the pace and the memory per response stays bounded.
final class ProxyBodyWriter: @unchecked Sendable {
  // Used only by the task answering the request.
  private let channel: any Channel
  private var head: HTTPResponseHead?
  /// Writes not yet known to have reached the socket, oldest first, with their sizes.
  private var inFlight: [(future: EventLoopFuture<Void>, bytes: Int)] = []
  private var bytesInFlight = 0
  private var ended = false
  /// The write that ended the response.
  private var last: EventLoopFuture<Void>?
  /// Bytes handed to NIO and not yet written to the socket before the next write waits: two cache chunks, or
  /// the many small buffers of an origin response, without a wait per buffer.
  static let maxBytesInFlight = 2 << 20

  init(channel: any Channel, head: HTTPResponseHead) {
    self.channel = channel
    self.head = head
  }

  func write(_ buffer: ByteBuffer, endingResponse: Bool = false) async throws {
    try await write(contentsOf: CollectionOfOne(buffer), endingResponse: endingResponse)
  }

  /// Writes the buffers with one flush, and the end of the response with them if `endingResponse`.
  func write(contentsOf buffers: some Collection<ByteBuffer>, endingResponse: Bool = false) async throws {
    precondition(!ended, "a write after the end of the response")
    var parts: [HTTPServerResponsePart] = []
    parts.reserveCapacity(buffers.count + 2)
    if let head {
      parts.append(.head(head))
      self.head = nil
    }
    for buffer in buffers where buffer.readableBytes > 0 { parts.append(.body(.byteBuffer(buffer))) }
    if endingResponse {
      parts.append(.end(nil))
      ended = true
    }
    if parts.isEmpty { return }
    let written = send(parts)
    if ended {
      last = written
      return
    }
    let size = buffers.reduce(0) { $0 + $1.readableBytes }
    inFlight.append((written, size))
    bytesInFlight += size
    while bytesInFlight > Self.maxBytesInFlight, !inFlight.isEmpty {
      let (oldest, size) = inFlight.removeFirst()
      bytesInFlight -= size
      try await oldest.get()
    }
  }

  /// Ends the response unless a write did: sends the head if nothing was written, then the end. The future
  /// completes once all of the response has reached the socket.
  func finish() -> EventLoopFuture<Void> {
    inFlight = []
    bytesInFlight = 0
    if let last { return last }
    var parts: [HTTPServerResponsePart] = []
    if let head {
      parts.append(.head(head))
      self.head = nil
    }
    parts.append(.end(nil))
    ended = true
    let written = send(parts)
    last = written
    return written
  }

  private func send(_ parts: [HTTPServerResponsePart]) -> EventLoopFuture<Void> {
    let channel = self.channel
    let promise = channel.eventLoop.makePromise(of: Void.self)
    let write: @Sendable () -> Void = {
      for (index, part) in parts.enumerated() {
        channel.write(part, promise: index == parts.count - 1 ? promise : nil)
      }
      channel.flush()
    }
    if channel.eventLoop.inEventLoop { write() } else { channel.eventLoop.execute(write) }
    return promise.futureResult
  }
}

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
  private var head: HTTPRequestHead?
  private var idleTimer: Scheduled<Void>?
  private var responding: Task<Void, Never>?
  /// Requests answered on this connection so far: a response that ends re-arms the timer only if it is the
  /// latest (NIO's pipelining handler may hand over the next request before the previous end completes).
  private var requestCount = 0
  /// The proxy is stopping: close after the response in progress.
  private var quiescing = false

  init(responder: ProxyResponder, clientTimeout: TimeAmount, connections: ProxyConnections) {
    self.responder = responder
    self.clientTimeout = clientTimeout
    self.connections = connections
  }

  func handlerAdded(context: ChannelHandlerContext) {
    if context.channel.isActive { armIdleTimer(context) }
  }

  func channelActive(context: ChannelHandlerContext) {
    armIdleTimer(context)
    context.fireChannelActive()
  }

  func channelInactive(context: ChannelHandlerContext) {
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
    case .body:
      armIdleTimer(context)  // GET and HEAD bodies mean nothing here
    case .end:
      idleTimer?.cancel()
      idleTimer = nil
      guard let head else { return }
      self.head = nil
      respond(to: head, context)
    }
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
    if responding == nil && head == nil { context.close(promise: nil) }
  }

  private func armIdleTimer(_ context: ChannelHandlerContext) {
    idleTimer?.cancel()
    let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
    idleTimer = context.eventLoop.scheduleTask(in: clientTimeout) { boundContext.value.close(promise: nil) }
  }

  private func respond(to head: HTTPRequestHead, _ context: ChannelHandlerContext) {
    requestCount += 1
    let number = requestCount
    let bound = NIOLoopBound(ResponseEnd(handler: self, context: context), eventLoop: context.eventLoop)
    let channel = context.channel
    let responder = self.responder
    let connections = self.connections
    connections.responseStarted()
    responding = Task {
      let answered = await ProxyConnectionHandler.answer(
        ProxyRequest(head: head), version: head.version, keepAlive: head.isKeepAlive, responder: responder,
        channel: channel)
      guard let (written, keepAlive) = answered else {
        // Cancelled (the client left or the proxy is stopping), or cut mid-body: the status is already sent.
        channel.close(promise: nil)
        connections.responseEnded()
        return
      }
      written.hop(to: channel.eventLoop).whenComplete { result in
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
    channel: any Channel
  ) async -> (EventLoopFuture<Void>, keepAlive: Bool)? {
    let response: ProxyResponse
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
    }
    let writer = ProxyBodyWriter(
      channel: channel, head: responseHead(response, version: version, keepAlive: keepAlive))
    do {
      switch response.body {
      case .empty: break
      case .bytes(let buffer): try await writer.write(buffer, endingResponse: true)
      case .stream(let write): try await write(writer)
      }
    } catch {
      return nil
    }
    return (writer.finish(), keepAlive)
  }

  private func responseEnded(
    _ context: ChannelHandlerContext, request number: Int, keepAlive: Bool, written: Result<Void, any Error>
  ) {
    guard case .success = written, keepAlive, !quiescing, context.channel.isActive else {
      context.close(promise: nil)
      return
    }
    // A later request already arrived (being read or answered): the connection is not idle.
    guard number == requestCount, head == nil else { return }
    responding = nil
    armIdleTimer(context)
  }

  static func responseHead(_ response: ProxyResponse, version: HTTPVersion, keepAlive: Bool)
    -> HTTPResponseHead
  {
    var headers = HTTPHeaders()
    headers.reserveCapacity(response.headers.count + 3)
    headers.add(name: "date", value: HTTPDate.now())
    headers.add(name: "server", value: "MediaCache")
    for field in response.headers { headers.add(name: field.name.rawName, value: field.value) }
    if !keepAlive {
      headers.replaceOrAdd(name: "connection", value: "close")
    } else if version.major == 1 && version.minor == 0 {
      headers.replaceOrAdd(name: "connection", value: "keep-alive")
    }
    return HTTPResponseHead(
      version: version,
      status: HTTPResponseStatus(
        statusCode: response.status.code, reasonPhrase: response.status.reasonPhrase),
      headers: headers)
  }
}

/// Sent through a connection's pipeline when the proxy stops (see `ProxyConnectionHandler`).
struct ProxyQuiesceEvent: Sendable {}

/// The open connections of a running server and its responses in progress, so it can stop taking new
/// requests, let the current responses finish, and cut what is left.
final class ProxyConnections: Sendable {
  private struct State {
    var channels: [ObjectIdentifier: any Channel] = [:]
    var responses = 0
    var draining = false
    var drained: [CheckedContinuation<Void, Never>] = []

    mutating func takeDrainedIfIdle() -> [CheckedContinuation<Void, Never>] {
      guard draining, channels.isEmpty, responses == 0 else { return [] }
      defer { drained = [] }
      return drained
    }
  }
  private let state = Mutex(State())

  func opened(_ channel: any Channel) {
    state.withLock { $0.channels[ObjectIdentifier(channel)] = channel }
    channel.closeFuture.whenComplete { [self] _ in
      resume(
        state.withLock { state in
          state.channels[ObjectIdentifier(channel)] = nil
          return state.takeDrainedIfIdle()
        })
    }
  }

  func responseStarted() { state.withLock { $0.responses += 1 } }

  func responseEnded() {
    resume(
      state.withLock { state in
        state.responses -= 1
        return state.takeDrainedIfIdle()
      })
  }

  /// Asks every connection to close once its current response is written (idle ones close at once), and
  /// returns when all connections are closed and every response task has ended.
  func drain() async {
    await withCheckedContinuation { continuation in
      let channels = state.withLock { state -> [any Channel] in
        state.draining = true
        state.drained.append(continuation)
        return Array(state.channels.values)
      }
      for channel in channels { channel.pipeline.fireUserInboundEventTriggered(ProxyQuiesceEvent()) }
      resume(state.withLock { $0.takeDrainedIfIdle() })
    }
  }

  /// Closes every connection now (their response tasks are cancelled as they close).
  func closeAll() {
    for channel in state.withLock({ Array($0.channels.values) }) { channel.close(promise: nil) }
  }

  private func resume(_ waiters: [CheckedContinuation<Void, Never>]) {
    for waiter in waiters { waiter.resume() }
  }
}
