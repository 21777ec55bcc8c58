// `floor-server`: the least an HTTP server on SwiftNIO does to answer the time-to-first-byte request, for
// `tools/bench` to measure beside the proxy and nginx. It is set up like `mediacache proxy` answering a hit
// whose pages are in memory (NIO's HTTP/1.1 pipeline, TCP_NODELAY, the response written on the connection's
// event loop as the request ends, one loop) but answers every request with a 206 and 64 KiB held in memory: no
// cache, no file, no origin. The proxy's time to first byte on a hit cannot be below this server's, so its
// ratio to nginx bounds the proxy's. (Until 2026-12-05 it answered from a task, as the proxy did before its
// loops answered hits: 0.05-0.07 ms more per request, docs/PERFORMANCE.md.)
//
//   mediacache-bench floor-server   prints "listening on http://127.0.0.1:PORT", serves until killed

import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

private final class FloorHandler: FloorConnectionHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart
  static let body = ByteBuffer(repeating: 0x5A, count: 65536)
  var keepAlive = true

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let request): keepAlive = request.isKeepAlive
    case .body: break
    case .end:
      var head = HTTPResponseHead(version: .http1_1, status: .partialContent)
      head.headers.add(name: "Content-Length", value: "65536")
      head.headers.add(name: "Content-Range", value: "bytes 0-65535/4194304")
      context.write(wrapOutboundOut(.head(head)), promise: nil)
      context.write(wrapOutboundOut(.body(.byteBuffer(Self.body))), promise: nil)
      endResponse(context, keepAlive: keepAlive)
    }
  }
}

struct FloorServerCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "floor-server",
    abstract:
      "A minimal SwiftNIO server set up like the proxy, answering every request with 64 KiB from memory.",
    discussion: """
      The floor under the proxy's time to first byte (tools/bench-src/FloorServer.swift).
      """)

  func run() async throws {
    try await serveMinimalHTTP(threads: 1) { FloorHandler() }
  }
}

/// The handler of a floor server's connection, which closes on any error of its pipeline.
protocol FloorConnectionHandler: ChannelInboundHandler where OutboundOut == HTTPServerResponsePart {}

extension FloorConnectionHandler {
  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    context.close(promise: nil)
  }

  /// Writes the end of the response and flushes; closes the connection after it, as the proxy does, when the
  /// request asked for that (`Connection: close`, or HTTP/1.0 without keep-alive). Left open, a client such as
  /// `wrk` sends its next request on it, which NIO's pipeline answers with a 400.
  func endResponse(_ context: ChannelHandlerContext, keepAlive: Bool) {
    guard !keepAlive else {
      context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
      return
    }
    let channel = context.channel
    context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
  }
}

/// Serves HTTP/1.1 on 127.0.0.1 at a free port as `mediacache proxy` does on Linux (NIO's server pipeline;
/// TCP_NODELAY set by NIO on the listening socket and copied by Linux to accepted ones, not set per connection),
/// one `makeHandler()` per connection after the pipeline, on `threads` event loops; prints "listening on
/// http://127.0.0.1:PORT" and serves until killed (the floor servers of tools/bench).
func serveMinimalHTTP(
  threads: Int, makeHandler: @escaping @Sendable () -> some ChannelInboundHandler
) async throws {
  let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
  let channel = try await ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 512)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { child in
      child.eventLoop.makeCompletedFuture {
        try child.pipeline.syncOperations.configureHTTPServerPipeline()
        try child.pipeline.syncOperations.addHandler(makeHandler())
      }
    }
    .bind(host: "127.0.0.1", port: 0).get()
  let line = "listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)\n"
  FileHandle.standardOutput.write(Data(line.utf8))
  try await channel.closeFuture.get()
}
