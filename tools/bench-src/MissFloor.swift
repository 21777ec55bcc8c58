// `miss-floor`: the least a server on the proxy's stack (SwiftNIO's HTTP/1.1 server, AsyncHTTPClient to the
// origin) does to answer a request from the origin, for `tools/bench` to measure beside the proxy's miss and
// nginx `slice`'s. Each request's path and Range go to the origin through an AsyncHTTPClient set up like the
// proxy's (`.singleton` event loops, HTTP/1.1, no decompression, kept-alive connections), sent from the event
// loop that read the request, and the origin's status, fields and body are relayed to the client as they come:
// no cache, no file, no task, no check. A miss through the proxy also opens and creates the object, selects a
// flight and writes the bytes it relays; it cannot be faster than this relay, so the relay's ratio to nginx
// `slice` bounds the proxy's on this stack.
//
//   mediacache-bench miss-floor --origin http://127.0.0.1:PORT [--event-loops N]
//       prints "listening on http://127.0.0.1:PORT", serves until killed

import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// Relays one origin response to the client's channel: the head is written, each body part written and
/// flushed (so the head leaves with the first bytes, as the proxy sends them), the end written and flushed.
private final class MissFloorRelay: HTTPClientResponseDelegate, Sendable {
  typealias Response = Void
  let channel: any Channel
  /// Fields that describe the origin's connection, not the response.
  static let hopByHop: Set<String> = [
    "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
  ]

  init(channel: any Channel) { self.channel = channel }

  func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
    var out = HTTPResponseHead(version: .http1_1, status: head.status)
    for (name, value) in head.headers where !Self.hopByHop.contains(name.lowercased()) {
      out.headers.add(name: name, value: value)
    }
    channel.write(HTTPServerResponsePart.head(out), promise: nil)
    return task.eventLoop.makeSucceededVoidFuture()
  }

  func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
    // The write's completion is the origin's backpressure.
    channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(buffer))).hop(to: task.eventLoop)
  }

  func didFinishRequest(task: HTTPClient.Task<Void>) throws {
    channel.writeAndFlush(HTTPServerResponsePart.end(nil), promise: nil)
  }

  func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
    channel.close(promise: nil)
  }
}

private final class MissFloorHandler: FloorConnectionHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart
  let client: HTTPClient
  let origin: String
  private var head: HTTPRequestHead?

  init(client: HTTPClient, origin: String) {
    self.client = client
    self.origin = origin
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let request): head = request
    case .body: break
    case .end:
      guard let request = head else { return }
      head = nil
      var headers = HTTPHeaders()
      if let range = request.headers.first(name: "Range") { headers.add(name: "Range", value: range) }
      do {
        let outgoing = try HTTPClient.Request(url: origin + request.uri, method: .GET, headers: headers)
        _ = client.execute(request: outgoing, delegate: MissFloorRelay(channel: context.channel))
      } catch {
        context.close(promise: nil)
      }
    }
  }
}

struct MissFloorCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "miss-floor",
    abstract: "A minimal SwiftNIO server relaying every request to an origin through AsyncHTTPClient.",
    discussion: """
      The floor under the proxy's time to first byte of a miss (tools/bench-src/MissFloor.swift).
      """)

  @Option(help: "The origin, as scheme://host:port; the request's path is appended.")
  var origin: String

  @Option(help: "Event loops of the server (default: one per core, as the proxy).")
  var eventLoops: Int = System.coreCount

  func validate() throws {
    guard let url = URL(string: origin), url.scheme == "http", url.host != nil, url.path.isEmpty else {
      throw ValidationError("--origin must be http://host[:port] with no path, not '\(origin)'")
    }
    guard eventLoops >= 1 else {
      throw ValidationError("--event-loops must be at least 1, not \(eventLoops)")
    }
  }

  func run() async throws {
    var settings = HTTPClient.Configuration(decompression: .disabled)
    settings.httpVersion = .http1Only
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
    let origin = self.origin
    try await serveMinimalHTTP(threads: eventLoops) { MissFloorHandler(client: client, origin: origin) }
    try await client.shutdown()
  }
}
