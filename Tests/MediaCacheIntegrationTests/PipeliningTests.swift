import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// Requests a client sends before reading the responses (HTTP/1.1 pipelining). NIO's pipelining handler hands
/// the proxy the next request as soon as the last response's end is written, whatever that response said and
/// whether or not the client read it.
@Suite(.serialized)
struct PipeliningTests {
  static let chunkSize = 65536

  /// A proxy over a reader whose objects linger open (so that hits are answered on the loop), the origin and
  /// the proxy's metrics, for `body`.
  func withProxy(_ body: (Int, TestOrigin, ProxyServer) async throws -> Void) async throws {
    var configuration = CachingReader.Configuration()
    configuration.idleSessionLinger = .seconds(60)
    try await withReader(chunkSize: Self.chunkSize, configuration: configuration) { reader, origin, _ in
      let (proxy, endpoint, server) = try await startInProcessProxy(reader)
      defer { server.cancel() }
      try await body(endpoint.port, origin, proxy)
    }
  }

  /// An HTTP/1.0 client that asks to keep the connection gets a body of unknown length delimited by the
  /// connection's end; a request it pipelined after it is not answered, so no other response's bytes end up
  /// in that body.
  @Test func anHTTP10BodyEndedByTheConnectionHasNothingAfterIt() async throws {
    try await withProxy { port, origin, _ in
      let size = 200_000
      let path = ProxyServer.proxyPath(for: origin.url(.chunked, "close-delimited", size: size))
      let expected = TestOrigin.bytes(name: "close-delimited", size: size)
      // The request pipelined after it is a hit (answered on the loop, at once, when it is handed over).
      let hitPath = ProxyServer.proxyPath(for: origin.url(.normal, "pipelined-hit", size: 100_000))
      // Fetched, then read from the cache: its object stays open, so a range of it is a hit on the loop.
      for _ in 0..<2 {
        let filled = try await blocking { try rawRequest(port: port, hitPath) }
        #expect(filled.status == 200)
        try await Task.sleep(for: .milliseconds(100))
      }
      let response = try await blocking { () throws -> RawHTTPResponse in
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 10)
        defer { connection.close() }
        try connection.send(
          "GET \(path) HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
            + "GET \(hitPath) HTTP/1.0\r\nConnection: keep-alive\r\nRange: bytes=0-999\r\n\r\n")
        return try connection.readResponse()
      }
      #expect(response.status == 200)
      #expect(response.header("Content-Length") == nil)
      #expect(response.header("Connection")?.lowercased() == "close")
      #expect(response.body.count == size, "the body ran on past the object's bytes")
      #expect(response.body.count != size || response.body == expected, "not the object's bytes")
    }
  }

  /// A client that pipelines many requests for hits and reads nothing gets them answered only as fast as its
  /// socket takes them: the proxy answers the next once the channel is writable again, instead of writing all
  /// of them into memory at once. Once it reads, every response comes, in order and whole.
  @Test func pipelinedHitsWaitForTheSocket() async throws {
    try await withProxy { port, origin, proxy in
      let size = 4 << 20
      let path = ProxyServer.proxyPath(for: origin.url(.normal, "pipelined", size: size))
      let expected = TestOrigin.bytes(name: "pipelined", size: size)
      let filled = try await blocking { try rawRequest(port: port, path) }
      #expect(filled.body == expected)

      // 200 requests of 1 MiB ranges (hits answered on the loop), sent at once; nothing read for a second.
      let count = 200
      let ranges = (0..<count).map { index -> Range<Int> in
        let start = (index * 77_777) % (size - (1 << 20))
        return start..<(start + (1 << 20))
      }
      let connection = try RawHTTPConnection(port: port, timeoutSeconds: 20)
      defer { connection.close() }
      var text = ""
      for range in ranges {
        text +=
          "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=\(range.lowerBound)-\(range.upperBound - 1)\r\n\r\n"
      }
      try connection.send(text)
      await proxy.metrics.countsSettled()
      let before = proxy.metrics.bytesFromCache
      try await Task.sleep(for: .seconds(1))
      // Served (counted when answered) while the client read nothing: what its socket buffers and NIO's
      // high-water mark take, a few MiB, not 200.
      await proxy.metrics.countsSettled()
      let servedWhileStalled = proxy.metrics.bytesFromCache - before
      #expect(
        servedWhileStalled < 32 << 20,
        "\(servedWhileStalled >> 20) MiB answered to a client that read nothing")

      nonisolated(unsafe) let reading = connection  // one thread at a time: here, then the closure
      let bodies = try await blocking { () throws -> [[UInt8]] in
        try (0..<count).map { _ in
          let response = try reading.readResponse()
          guard response.status == 206 else { throw RawHTTPError(description: "status \(response.status)") }
          return response.body
        }
      }
      for (index, body) in bodies.enumerated() where body != Array(expected[ranges[index]]) {
        Issue.record("response \(index) is not the bytes of \(ranges[index])")
        break
      }
    }
  }

  /// A request whose body is still coming when the proxy begins to stop (SIGTERM) is answered, then the
  /// connection closes and the proxy exits. (Dropped, as a request pipelined behind a response in progress is,
  /// it would keep its connection open, and the stopping proxy waiting for it.)
  @Test func aRequestWhoseBodyIsComingWhenTheProxyStopsIsAnsweredAndTheProxyExits() async throws {
    try await withTemporaryDirectory { directory in
      let (proxy, port) = try await startProxy(cache: "\(directory)/cache", [])
      defer { proxy.kill() }
      let body = "{\"items\":[]}"
      let connection = try RawHTTPConnection(port: port, timeoutSeconds: 10)
      defer { connection.close() }
      // A request answered first on the same connection: the proxy has accepted it and its loop serves it
      // before the stop begins. (Without it, on a loaded machine, the stop could come before the proxy read the
      // PUT's head, and a connection with no request begun is closed as idle, as it should be.)
      try connection.sendRequest("GET", "/metrics")
      nonisolated(unsafe) let warming = connection  // one thread at a time: here, then the closure
      #expect(try await blocking { try warming.readResponse() }.status == 200)
      try connection.sendRequest(
        "PUT", "/preload",
        headers: [("Content-Type", "application/json"), ("Content-Length", "\(body.utf8.count)")])
      try connection.send(String(body.prefix(3)))
      try await Task.sleep(for: .milliseconds(500))
      // The stop and the rest of the body 300 ms later on one thread: well inside the proxy's graceful stop
      // however long the test's task waits for the pool.
      nonisolated(unsafe) let sending = connection  // one thread at a time: here, then the closures
      try await blocking {
        proxy.kill(SIGTERM)
        usleep(300_000)
        try sending.send(String(body.dropFirst(3)))
      }
      nonisolated(unsafe) let reading = connection
      let response = try await blocking { try reading.readResponse() }
      #expect((200..<500).contains(response.status), "status \(response.status)")
      #expect(try await blocking { try reading.serverClosed() }, "the connection stayed open")
      let result = await proxy.wait(timeout: 20)
      #expect(result.status == 0, "exit status \(result.status): \(result.stderr)")
    }
  }
}
