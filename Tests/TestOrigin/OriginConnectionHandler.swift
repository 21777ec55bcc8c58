import NIOCore
import NIOHTTP1

/// Answers the requests of one connection, one at a time, on the connection's event loop.
///
/// Bodies are produced piece by piece (64 KiB, 16 KiB in `slow`; a file is read with one `pread` per piece):
/// a piece is generated only while fewer than `maxPiecesInFlight` written pieces are still waiting for their
/// write to complete, so a client that reads slowly holds the origin to a few pieces beyond what the kernel
/// buffers.
final class OriginConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  static let maxPiecesInFlight = 2

  /// The response being written.
  private final class ActiveResponse {
    let recordID: Int
    var producer: BodyProducer?
    let delay: TimeAmount?
    /// Bytes sent before `delay` applies.
    let burst: Int
    /// Body bytes produced so far.
    var produced = 0
    let closeAfter: Bool
    var truncates: Bool
    var inFlight = 0
    var bytesSent = 0
    var producing: Bool
    var waitingForDelay = false
    var pumping = false
    var needsPump = false
    var delayTask: Scheduled<Void>?

    init(recordID: Int, plan: ResponsePlan) {
      self.recordID = recordID
      self.producer = plan.body.map(BodyProducer.init)
      self.producing = plan.body != nil
      if case .object(_, _, _, let delay, _) = plan.body { self.delay = delay } else { self.delay = nil }
      self.burst = plan.burst
      self.closeAfter = plan.closeAfter
      self.truncates = plan.truncates
    }
  }

  private let state: OriginState
  private let connectionID: Int
  private var context: ChannelHandlerContext?
  private var pendingHead: HTTPRequestHead?
  private var queue: [HTTPRequestHead] = []
  private var current: ActiveResponse?
  private var isActive = true

  init(state: OriginState, connectionID: Int) {
    self.state = state
    self.connectionID = connectionID
  }

  func handlerAdded(context: ChannelHandlerContext) { self.context = context }

  func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let head):
      pendingHead = head
    case .body:
      break
    case .end:
      guard let head = pendingHead else { return }
      pendingHead = nil
      queue.append(head)
      startNextIfIdle()
    }
  }

  func channelInactive(context: ChannelHandlerContext) {
    isActive = false
    queue.removeAll()
    if let response = current {
      finish(response, disconnected: true)
    }
    context.fireChannelInactive()
  }

  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    // Connection resets and the like: the connection is unusable, channelInactive records the rest.
    context.close(promise: nil)
  }

  private func startNextIfIdle() {
    guard current == nil, isActive, let context, !queue.isEmpty else { return }
    let head = queue.removeFirst()
    let local = context.channel.localAddress
    let plan = ResponsePlanner.plan(
      for: head, state: state, localHost: local?.ipAddress ?? "127.0.0.1", localPort: local?.port ?? 0)
    var requestHeaders: [String: String] = [:]
    for (name, value) in head.headers {
      let key = name.lowercased()
      requestHeaders[key] = requestHeaders[key].map { "\($0), \(value)" } ?? value
    }
    let connectionID = self.connectionID
    let recordID = state.addRecord { id in
      RecordedRequest(
        id: id, connectionID: connectionID, method: head.method.rawValue, path: head.uri, mode: plan.mode,
        name: plan.name, range: head.headers.first(name: "Range"),
        ifRange: head.headers.first(name: "If-Range"),
        headers: requestHeaders, status: Int(plan.status.code), bodyBytesSent: 0, clientDisconnected: false,
        isComplete: false)
    }
    if plan.resets {
      state.updateRecord(recordID) {
        $0.status = 0; $0.isComplete = true
      }
      context.close(promise: nil)
      return
    }
    let response = ActiveResponse(recordID: recordID, plan: plan)
    current = response
    let responseHead = HTTPResponseHead(version: .http1_1, status: plan.status, headers: plan.headers)
    context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
    pump(response)
  }

  /// Writes pieces while the response may have more in flight; ends the response when all are written.
  private func pump(_ response: ActiveResponse) {
    guard current === response, let context else { return }
    if response.pumping {
      // Called back from a write that completed synchronously inside the loop below.
      response.needsPump = true
      return
    }
    response.pumping = true
    defer { response.pumping = false }
    repeat {
      response.needsPump = false
      while current === response && response.producing && !response.waitingForDelay
        && response.inFlight < Self.maxPiecesInFlight
      {
        guard let piece = response.producer?.next(allocator: context.channel.allocator) else {
          response.producing = false
          // A file that got shorter than announced: end like `truncated` (close, no clean end).
          if response.producer?.endedEarly == true { response.truncates = true }
          break
        }
        response.inFlight += 1
        response.produced += piece.readableBytes
        if let delay = response.delay, response.produced >= response.burst {
          response.waitingForDelay = true
          response.delayTask = context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            response.waitingForDelay = false
            response.delayTask = nil
            self.pump(response)
          }
        }
        let count = piece.readableBytes
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(piece)))).assumeIsolated().whenComplete {
          result in
          self.pieceWritten(response, count: count, result: result)
        }
      }
    } while response.needsPump && current === response
    if current === response && !response.producing && response.inFlight == 0 {
      endResponse(response)
    }
  }

  private func pieceWritten(_ response: ActiveResponse, count: Int, result: Result<Void, any Error>) {
    guard current === response else { return }
    switch result {
    case .success:
      response.inFlight -= 1
      response.bytesSent += count
      let sent = response.bytesSent
      state.updateRecord(response.recordID) { $0.bodyBytesSent = sent }
      pump(response)
    case .failure:
      finish(response, disconnected: true)
      context?.close(promise: nil)
    }
  }

  private func endResponse(_ response: ActiveResponse) {
    guard let context else { return }
    if response.truncates {
      // Everything meant to be sent has been written: close without ending the response.
      finish(response, disconnected: false)
      context.close(promise: nil)
      return
    }
    context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { result in
      guard self.current === response else { return }
      var failed = false
      if case .failure = result { failed = true }
      self.finish(response, disconnected: failed)
      if response.closeAfter || failed {
        self.context?.close(promise: nil)
      } else {
        self.startNextIfIdle()
      }
    }
  }

  private func finish(_ response: ActiveResponse, disconnected: Bool) {
    guard current === response else { return }
    current = nil
    response.producing = false
    response.delayTask?.cancel()
    response.delayTask = nil
    let sent = response.bytesSent
    state.updateRecord(response.recordID) { record in
      record.bodyBytesSent = sent
      record.clientDisconnected = disconnected
      record.isComplete = true
    }
  }
}

/// Produces a response body piece by piece.
struct BodyProducer {
  private enum Source {
    case fixed([UInt8]?)
    case object(seed: UInt64, next: Int, end: Int, pieceSize: Int)
    case gzip(GzipProducer)
    case file(OpenFile, next: Int, end: Int, pieceSize: Int)
  }

  private var source: Source
  /// The body ended before its announced length (a file read came back short).
  private(set) var endedEarly = false

  init(_ body: ResponsePlan.Body) {
    switch body {
    case .fixed(let bytes):
      source = .fixed(bytes)
    case .object(let seed, let range, let pieceSize, _, let limit):
      let end = limit.map { range.lowerBound + min($0, range.count) } ?? range.upperBound
      source = .object(seed: seed, next: range.lowerBound, end: end, pieceSize: pieceSize)
    case .gzip(let seed, let size):
      source = .gzip(GzipProducer(seed: seed, size: size))
    case .file(let file, let range, let pieceSize):
      source = .file(file, next: range.lowerBound, end: range.upperBound, pieceSize: pieceSize)
    }
  }

  mutating func next(allocator: ByteBufferAllocator) -> ByteBuffer? {
    switch source {
    case .fixed(let bytes):
      source = .fixed(nil)
      guard let bytes, !bytes.isEmpty else { return nil }
      return allocator.buffer(bytes: bytes)
    case .object(let seed, let next, let end, let pieceSize):
      guard next < end else { return nil }
      let count = min(pieceSize, end - next)
      var buffer = allocator.buffer(capacity: count)
      buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
        ObjectBytes.fill(UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]), seed: seed, offset: next)
        return count
      }
      source = .object(seed: seed, next: next + count, end: end, pieceSize: pieceSize)
      return buffer
    case .gzip(var producer):
      let piece = producer.nextPiece()
      source = .gzip(producer)
      return piece.map { allocator.buffer(bytes: $0) }
    case .file(let file, let next, let end, let pieceSize):
      guard next < end else { return nil }
      let wanted = min(pieceSize, end - next)
      var buffer = allocator.buffer(capacity: wanted)
      let count = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted) { raw in
        file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<wanted]), at: next)
      }
      guard count > 0 else {
        endedEarly = true
        source = .fixed(nil)
        return nil
      }
      source = .file(file, next: next + count, end: end, pieceSize: pieceSize)
      return buffer
    }
  }
}
