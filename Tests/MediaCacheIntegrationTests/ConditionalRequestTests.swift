import Foundation
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// A client's `If-None-Match` and `If-Modified-Since` through the real binary (RFC 9110 §13): a copy that is
/// current gets `304 Not Modified` with its validator and no body, from the cache when the object is there;
/// `If-None-Match` decides alone when present (weak comparison, `*`); a date that does not parse is ignored; a
/// condition beats a `Range`. Every forwarded response says `Via`.
@Suite(.serialized) struct ConditionalRequestTests {
  static let size = 200_000

  /// A proxy process on a fresh cache and an origin; `get` asks the proxy for the origin's object `name`.
  func withObject(
    _ name: String,
    _ body: (
      _ origin: TestOrigin, _ proxy: ProxyProcess,
      _ get: (_ headers: [(String, String)], _ method: String) async throws -> RawHTTPResponse
    ) async throws -> Void
  ) async throws {
    try await withTemporaryDirectory { directory in
      let origin = try await TestOrigin.start()
      defer { Task { try? await origin.shutdown() } }
      let proxy = try await ProxyProcess(cache: "\(directory)/cache")
      let path = ProxyServer.proxyPath(for: origin.url(.normal, name, size: Self.size))
      try await body(origin, proxy) { headers, method in
        try await blocking { try proxy.request(path, method: method, headers: headers) }
      }
    }
  }

  @Test func currentCopiesGet304FromTheCache() async throws {
    try await withObject("cond") { origin, proxy, ask in
      let size = Self.size
      let etag = TestOrigin.etag(name: "cond")
      let lastModified = TestOrigin.lastModified()
      func get(_ headers: [(String, String)], method: String = "GET") async throws -> RawHTTPResponse {
        try await ask(headers, method)
      }
      func expectNotModified(_ response: RawHTTPResponse, _ what: String) {
        #expect(response.status == 304, "\(what): \(response.status)")
        #expect(response.bodyCount == 0, "\(what)")
        #expect(response.header("ETag") == etag, "\(what)")
        #expect(response.header("Content-Length") == nil && response.header("Content-Type") == nil, "\(what)")
        #expect(response.header("Via") == "1.1 MediaCache", "\(what)")
      }

      // Not cached yet: the origin is asked (for the validators), and the answer is still 304.
      expectNotModified(try await get([("If-None-Match", etag)]), "a miss")
      let whole = try await get([])
      #expect(whole.status == 200 && sameBytes(whole.body, TestOrigin.bytes(name: "cond", size: size)).equal)
      #expect(whole.header("Via") == "1.1 MediaCache")
      let requests = origin.requests(for: "cond").count

      for (headers, what) in [
        ([("If-None-Match", etag)], "the ETag"),
        ([("If-None-Match", "\"other\", W/\(etag)")], "a weak match in a list"),
        ([("If-None-Match", "*")], "*"),
        ([("If-Modified-Since", lastModified)], "If-Modified-Since the Last-Modified"),
        ([("If-Modified-Since", "Monday, 01-Jan-24 00:00:01 GMT")], "a later date in the RFC 850 form"),
        ([("If-None-Match", etag), ("Range", "bytes=0-99")], "a condition and a Range"),
      ] {
        let response = try await get(headers)
        expectNotModified(response, what)
        #expect(response.header("Cache-Status") == "MediaCache; hit", "\(what)")
      }
      expectNotModified(try await get([("If-None-Match", etag)], method: "HEAD"), "HEAD")
      #expect(origin.requests(for: "cond").count == requests, "the 304s came from the cache")

      for (headers, what) in [
        ([("If-None-Match", "\"other\"")], "another ETag"),
        (
          [("If-None-Match", "\"other\""), ("If-Modified-Since", lastModified)], "If-None-Match decides alone"
        ),
        ([("If-Modified-Since", "Sun, 31 Dec 2023 23:59:59 GMT")], "an earlier date"),
        ([("If-Modified-Since", "yesterday")], "a date that does not parse"),
      ] {
        let response = try await get(headers)
        #expect(response.status == 200, "\(what): \(response.status)")
        #expect(sameBytes(response.body, TestOrigin.bytes(name: "cond", size: size)).equal, "\(what)")
      }

      // Without an ETag the 304 carries the Last-Modified.
      let dated = ProxyServer.proxyPath(for: origin.url(.lastmod, "dated", size: 1000))
      let response = try await blocking {
        try proxy.request(dated, headers: [("If-Modified-Since", "Tue, 02 Jan 2024 00:00:00 GMT")])
      }
      #expect(response.status == 304 && response.header("ETag") == nil)
      #expect(response.header("Last-Modified") == lastModified)
      #expect(await proxy.stop().status == 0)
    }
  }
  /// `If-Match` and `If-Unmodified-Since` (RFC 9110 §13.1.1, §13.1.4, in the order of §13.2.2) evaluated on the
  /// copy the cache would send, as nginx evaluates them on a cached response: a client whose copy is another
  /// gets `412 Precondition Failed`, without the origin being asked; a match is served as without the field.
  @Test func preconditionsOfTheClientsCopyAreEvaluatedOnTheCachedOne() async throws {
    try await withObject("match") { origin, proxy, ask in
      let size = Self.size
      let etag = TestOrigin.etag(name: "match")
      let lastModified = TestOrigin.lastModified()
      let earlier = "Sun, 31 Dec 2023 23:59:59 GMT"
      let bytes = TestOrigin.bytes(name: "match", size: size)
      func get(_ headers: [(String, String)], method: String = "GET") async throws -> RawHTTPResponse {
        try await ask(headers, method)
      }
      // Another version's tag on a miss: the origin is asked, the cache's copy then decides.
      #expect(try await get([("If-Match", "\"other\"")]).status == 412)
      #expect(try await get([("If-Match", etag), ("Range", "bytes=0-9")]).status == 206)
      let whole = try await get([])
      #expect(whole.status == 200 && sameBytes(whole.body, bytes).equal)
      let requests = origin.requests(for: "match").count

      let cases: [(headers: [(String, String)], status: Int, what: String)] = [
        ([("If-Match", etag)], 200, "its ETag"),
        ([("If-Match", "\"other\", \(etag)")], 200, "its ETag in a list"),
        ([("If-Match", "*")], 200, "*"),
        ([("If-Match", "\"other\"")], 412, "another ETag"),
        ([("If-Match", "W/\(etag)")], 412, "its tag, weak (If-Match compares strongly)"),
        ([("If-Match", "\"other\""), ("Range", "bytes=0-99")], 412, "another ETag with a Range"),
        ([("If-Match", etag), ("Range", "bytes=0-99")], 206, "its ETag with a Range"),
        ([("If-Unmodified-Since", lastModified)], 200, "its Last-Modified"),
        ([("If-Unmodified-Since", earlier)], 412, "an earlier date"),
        ([("If-Unmodified-Since", "yesterday")], 200, "a date that does not parse"),
        ([("If-Match", etag), ("If-Unmodified-Since", earlier)], 200, "If-Match decides alone"),
        ([("If-Match", etag), ("If-None-Match", etag)], 304, "If-Match holds, then If-None-Match"),
      ]
      for (headers, status, what) in cases {
        let response = try await get(headers)
        #expect(response.status == status, "\(what): \(response.status)")
        switch status {
        case 200: #expect(sameBytes(response.body, bytes).equal, "\(what)")
        case 206: #expect(response.body == Array(bytes[0..<100]), "\(what)")
        case 412: #expect(response.header("Content-Type") == "text/plain; charset=utf-8", "\(what)")
        default: #expect(response.bodyCount == 0, "\(what)")
        }
      }
      #expect(try await get([("If-Match", "\"other\"")], method: "HEAD").status == 412)
      #expect(origin.requests(for: "match").count == requests, "decided on the cached copy")
      #expect(await proxy.stop().status == 0)
    }
  }
}
