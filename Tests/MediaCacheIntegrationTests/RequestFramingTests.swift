import Foundation
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// What the proxy makes of a request's framing fields, through the real binary: an HTTP/1.1 request without
/// `Host`, or with two, is a bad request (RFC 9112 §3.2), whether its target is a hit the connection's event
/// loop would answer or not, while HTTP/1.0 may leave `Host` out; a client that sends `Expect: 100-continue`
/// gets `100 Continue` before it sends its content (RFC 9110 §10.1.1), not after waiting for it in vain.
@Suite struct RequestFramingTests {
  /// One raw request on a fresh connection: `head` (request line and fields, without the blank line).
  func exchange(_ port: Int, _ head: String) async throws -> RawHTTPResponse {
    try await blocking {
      let connection = try RawHTTPConnection(port: port, timeoutSeconds: 10)
      defer { connection.close() }
      try connection.send(head + "\r\n\r\n")
      return try connection.readResponse()
    }
  }

  @Test func anHTTP11RequestNeedsExactlyOneHost() async throws {
    try await withProxy { fixture in
      let port = fixture.endpoint.port
      let size = 100_000
      let path = fixture.path(fixture.origin.url(.normal, "hosted", size: size))
      let bytes = TestOrigin.bytes(name: "hosted", size: size)
      let first = try await exchange(port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1")
      #expect(first.status == 200 && first.body == bytes)
      // Cached: on one connection (so on one event loop, which knows the target after its first hit), a
      // request with one Host is a hit answered on the loop; without, or with two, refused there too.
      let answers = try await blocking { () -> [RawHTTPResponse] in
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 10)
        defer { connection.close() }
        var answers: [RawHTTPResponse] = []
        for head in [
          "Host: 127.0.0.1\r\nRange: bytes=0-99", "Range: bytes=0-99", "Host: 127.0.0.1\r\nHost: example.com",
          "Host: 127.0.0.1\r\nRange: bytes=0-99", "Range: bytes=0-99",
        ] {
          try connection.send("GET \(path) HTTP/1.1\r\n\(head)\r\n\r\n")
          answers.append(try connection.readResponse())
        }
        return answers
      }
      #expect(answers.map(\.status) == [206, 400, 400, 206, 400])
      #expect(
        String(decoding: answers[1].body, as: UTF8.self) == "400 an HTTP/1.1 request must have a Host field\n"
      )
      #expect(
        String(decoding: answers[2].body, as: UTF8.self) == "400 the request has more than one Host field\n")
      #expect(answers[3].body == Array(bytes[0..<100]))
      let twoOld = try await exchange(port, "GET \(path) HTTP/1.0\r\nHost: a\r\nHost: b")
      #expect(twoOld.status == 400, "any request: at most one Host")
      let miss = try await exchange(
        port, "GET \(fixture.path(fixture.origin.url(.normal, "other", size: 10))) HTTP/1.1")
      #expect(miss.status == 400)
      let old = try await exchange(port, "GET \(path) HTTP/1.0")
      #expect(old.status == 200 && old.body == bytes)
      #expect(fixture.origin.requests(for: "other").isEmpty)
    }
  }

  @Test func aClientExpecting100ContinueGetsItBeforeItSendsItsContent() async throws {
    try await withProxy { fixture in
      let port = fixture.endpoint.port
      let (interim, blank, final) = try await blocking { () -> (String?, String?, RawHTTPResponse) in
        // A short receive timeout: without the interim response the client would wait, and this throws.
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 3)
        defer { connection.close() }
        try connection.send(
          "POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        let interim = try connection.readLine()
        let blank = try connection.readLine()
        try connection.send("hello")
        return (interim, blank, try connection.readResponse())
      }
      #expect(interim == "HTTP/1.1 100 Continue" && blank == "")
      #expect(final.status == 405)
      // `PUT /preload` (the proxy's one endpoint that reads content): 100, then its answer (a 400 for a feed
      // without items), and the connection goes on with the next request; a GET without content gets no 100.
      let statuses = try await blocking { () -> [Int] in
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 3)
        defer { connection.close() }
        try connection.send(
          "PUT /preload HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        let interim = try connection.readResponse()
        try connection.send("{}")
        let answer = try connection.readResponse()
        try connection.sendRequest("GET", "/metrics", headers: [("Expect", "100-continue")])
        return [interim.status, answer.status, try connection.readResponse().status]
      }
      #expect(statuses == [100, 400, 200])
    }
  }
}
