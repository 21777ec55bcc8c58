import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// HTTP semantics of the proxy against a real origin on 127.0.0.1, read with a raw socket client.
@Suite struct ProxyTests {
  /// 3 MiB and a bit, so ranges cross chunk boundaries and the last chunk is short.
  static let size = 3 * 1_048_576 + 12_345

  @Test func everyRangeFormColdAndWarmIsByteIdentical() async throws {
    try await withProxy { fixture in
      let url = fixture.origin.url(.normal, "ranges", size: Self.size)
      let path = fixture.path(url)
      let cases: [(header: String?, status: Int, expected: Range<Int>)] = [
        ("bytes=0-99", 206, 0..<100),
        ("bytes=1048570-1048580", 206, 1_048_570..<1_048_581),
        ("bytes=3000000-", 206, 3_000_000..<Self.size),
        ("bytes=-1000", 206, (Self.size - 1000)..<Self.size),
        ("bytes=-99999999", 206, 0..<Self.size),
        ("bytes=5-", 206, 5..<Self.size),
        ("bytes=10-99999999", 206, 10..<Self.size),
        (nil, 200, 0..<Self.size),
        ("bytes=0-1,5-9", 200, 0..<Self.size),  // several ranges: the whole body, documented
        ("bytes=9-5", 200, 0..<Self.size),  // invalid: ignored
        ("items=0-5", 200, 0..<Self.size),  // another unit: ignored
      ]
      for pass in ["cold", "warm"] {
        if pass == "warm" { fixture.origin.resetRecords() }
        for (header, status, expected) in cases {
          let response = try await fixture.request(path, headers: header.map { [("Range", $0)] } ?? [])
          let label = "\(pass) \(header ?? "no Range")"
          #expect(response.status == status, "\(label)")
          #expect(response.header("Accept-Ranges") == "bytes", "\(label)")
          #expect(response.header("Content-Length") == "\(expected.count)", "\(label)")
          #expect(response.header("ETag") == TestOrigin.etag(name: "ranges"), "\(label)")
          #expect(response.header("Content-Type") == "video/mp4", "\(label)")
          if status == 206 {
            #expect(
              response.header("Content-Range")
                == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(Self.size)", "\(label)")
          } else {
            #expect(response.header("Content-Range") == nil, "\(label)")
          }
          let body = sameBytes(
            response.body, TestOrigin.bytes(name: "ranges", size: Self.size, range: expected))
          #expect(body.equal, "\(label): \(body)")
        }
        if pass == "warm" {
          #expect(
            fixture.origin.requests(for: "ranges").isEmpty, "a warm pass is served from the cache alone")
        }
      }
    }
  }

  /// Found by tools/soak: the first request for an object, when it asked for a suffix (`bytes=-N`), was answered
  /// without the object's ETag and Last-Modified and as `application/octet-stream`: the length came from a probe
  /// whose head the cache does not record, and the response's head was made before any flight had the origin's.
  @Test(arguments: ["bytes=-1000", "bytes=-99999999"])
  func aSuffixRangeOfANewObjectCarriesItsValidatorsAndType(range: String) async throws {
    try await withProxy { fixture in
      let name = "suffix-\(range.count)"
      let response = try await fixture.request(
        fixture.path(fixture.origin.url(.normal, name, size: Self.size)), headers: [("Range", range)])
      let expected = range == "bytes=-1000" ? (Self.size - 1000)..<Self.size : 0..<Self.size
      #expect(response.status == 206)
      #expect(response.header("ETag") == TestOrigin.etag(name: name))
      #expect(response.header("Last-Modified") == TestOrigin.lastModified(version: 0))
      #expect(response.header("Content-Type") == "video/mp4")
      #expect(
        response.header("Content-Range")
          == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(Self.size)")
      #expect(sameBytes(response.body, TestOrigin.bytes(name: name, size: Self.size, range: expected)).equal)
      // An empty suffix of a new object is unsatisfiable, as of a cached one.
      let empty = try await fixture.request(
        fixture.path(fixture.origin.url(.normal, "\(name)-empty", size: Self.size)),
        headers: [("Range", "bytes=-0")])
      #expect(empty.status == 416)
    }
  }

  @Test func headAndUnsatisfiableRanges() async throws {
    try await withProxy { fixture in
      let path = fixture.path(fixture.origin.url(.normal, "head", size: Self.size))
      let head = try await fixture.request(path, method: "HEAD")
      #expect(head.status == 200)
      #expect(head.header("Content-Length") == "\(Self.size)")
      #expect(head.header("Accept-Ranges") == "bytes")
      #expect(head.bodyCount == 0)
      #expect(head.header("Date") != nil)
      // Range is defined for GET only (RFC 9110 §14.2): a HEAD gets the whole representation's head.
      let rangedHead = try await fixture.request(path, method: "HEAD", headers: [("Range", "bytes=10-19")])
      #expect(rangedHead.status == 200)
      #expect(rangedHead.header("Content-Range") == nil)
      #expect(rangedHead.header("Content-Length") == "\(Self.size)")
      for header in ["bytes=\(Self.size)-", "bytes=\(Self.size + 10)-\(Self.size + 20)", "bytes=-0"] {
        let response = try await fixture.request(path, headers: [("Range", header)])
        #expect(response.status == 416, "\(header)")
        #expect(response.header("Content-Range") == "bytes */\(Self.size)", "\(header)")
      }
      // A suffix of an object the cache has never seen: the length comes from a probe of the origin.
      let coldSuffix = try await fixture.request(
        fixture.path(fixture.origin.url(.normal, "coldsuffix", size: 50_000)),
        headers: [("Range", "bytes=-10")])
      #expect(coldSuffix.status == 206)
      #expect(coldSuffix.header("Content-Range") == "bytes 49990-49999/50000")
      #expect(coldSuffix.body == TestOrigin.bytes(name: "coldsuffix", size: 50_000, range: 49_990..<50_000))
      // The same on an object the cache has never seen: the length comes from the origin's 416.
      let cold = fixture.path(fixture.origin.url(.normal, "cold416", size: 1000))
      let response = try await fixture.request(cold, headers: [("Range", "bytes=5000-")])
      #expect(response.status == 416)
      #expect(response.header("Content-Range") == "bytes */1000")
      // An unsatisfiable range is the client's mistake, not an origin failure.
      #expect(try await fixture.metric("mediacache_proxy_origin_errors_total") == 0)
    }
  }

  @Test func ifRangeIsHonoured() async throws {
    try await withProxy { fixture in
      let path = fixture.path(fixture.origin.url(.normal, "ifrange", size: 100_000))
      let etag = TestOrigin.etag(name: "ifrange")
      let cases: [(ifRange: String, status: Int)] = [
        (etag, 206), ("\"other\"", 200), ("W/\(etag)", 200), (TestOrigin.lastModified(), 206),
        ("Tue, 02 Jan 2024 00:00:00 GMT", 200),
      ]
      for (ifRange, status) in cases {
        let response = try await fixture.request(
          path, headers: [("Range", "bytes=100-199"), ("If-Range", ifRange)])
        #expect(response.status == status, "If-Range \(ifRange)")
        // A 206 completing the client's copy carries no representation fields it already has (§15.3.7).
        #expect((response.header("Content-Type") == nil) == (status == 206), "If-Range \(ifRange)")
        #expect(response.header("Date") != nil)
        let expected = status == 206 ? 100..<200 : 0..<100_000
        let ifRangeBody = sameBytes(
          response.body, TestOrigin.bytes(name: "ifrange", size: 100_000, range: expected))
        #expect(ifRangeBody.equal, "\(ifRangeBody)")
      }
    }
  }

  /// The proxy's requests beside the cache's fetches follow their redirects under the same check: a stale
  /// copy's revalidation, and a pass-through (a response the cache may not store). They were followed by
  /// AsyncHTTPClient to any host.
  @Test func redirectsOfRevalidationsAndPassThroughsAreCheckedToo() async throws {
    try await withProxy(arguments: ["--allow-host", "127.0.0.1"]) { fixture in
      let stale = fixture.path(
        fixture.origin.url(.normal, "stale-r", size: 10, query: "cache-control=max-age%3D1"))
      let passed = fixture.path(
        fixture.origin.url(.normal, "passed-r", size: 10, query: "cache-control=no-store"))
      #expect(try await fixture.request(stale).status == 200)
      #expect(try await fixture.request(passed).status == 200)
      try await Task.sleep(for: .seconds(2))  // the first copy is stale now
      fixture.origin.setFault(.redirects(toHost: "localhost"))
      defer { fixture.origin.setFault(nil) }
      for name in ["stale-r", "passed-r"] {
        let before = fixture.origin.requests(for: name).count
        let response = try await fixture.request(name == "stale-r" ? stale : passed)
        let asked = fixture.origin.requests(for: name).count - before
        #expect(asked == 1, "\(name): \(asked) requests, the redirect was followed (\(response.status))")
      }
    }
  }

  /// An origin that answers the cache's first range of an empty file with 416 and `bytes */0` (RFC 9110; S3,
  /// Go's file server): the object is empty, a GET of it a 200 of no bytes (it was the origin's 416). Not
  /// cached: the 416 says nothing of its freshness, and a file empty for a moment must not stay so.
  @Test func anEmptyObjectWhoseOriginRefusesRangesIsA200OfNoBytes() async throws {
    try await withProxy { fixture in
      let path = fixture.path(fixture.origin.url(.normal, "nothing", size: 0))
      for attempt in 1...2 {
        let response = try await fixture.request(path)
        #expect(response.status == 200, "\(attempt): \(String(decoding: response.body, as: UTF8.self))")
        #expect(response.body.isEmpty && response.header("Content-Length") == "0", "\(attempt)")
        #expect(fixture.origin.requests(for: "nothing").count == attempt, "asked each time")
      }
      let head = try await fixture.request(path, method: "HEAD")
      #expect(head.status == 200 && head.header("Content-Length") == "0")
      // Any range of it is unsatisfiable, as the origin says.
      let range = try await fixture.request(path, headers: [("Range", "bytes=0-")])
      #expect(range.status == 416 && range.header("Content-Range") == "bytes */0")
      // Once the file has bytes, they are served.
      fixture.origin.setSize(name: "nothing", to: 1000)
      let grown = try await fixture.request(path)
      #expect(grown.status == 200 && grown.body == TestOrigin.bytes(name: "nothing", size: 1000))
    }
  }

  /// `--allow-host` holds for where an origin redirects too: a redirect to another host is not followed.
  @Test func aRedirectToAHostNotAllowedIsNotFollowed() async throws {
    try await withProxy(arguments: ["--allow-host", "127.0.0.1"]) { fixture in
      let refused = try await fixture.request(
        fixture.path(fixture.origin.url(.redirect, "elsewhere", size: 10, query: "host=localhost")))
      let body = String(decoding: refused.body, as: UTF8.self)
      #expect(refused.status == 502, "\(body)")
      #expect(
        body.contains("redirected to http://localhost:") && body.contains("not an allowed host"), "\(body)")
      #expect(fixture.origin.requests(for: "elsewhere").map(\.mode) == ["redirect"])
      // A redirect to an allowed host is followed.
      let followed = try await fixture.request(
        fixture.path(fixture.origin.url(.redirect, "here", size: 10)))
      #expect(followed.status == 200)
      #expect(fixture.origin.requests(for: "here").map(\.mode) == ["redirect", "normal"])
    }
  }

  @Test func refusesOtherSchemesHostsAndMethods() async throws {
    try await withProxy(arguments: ["--allow-host", "127.0.0.1"]) { fixture in
      for target in [
        "file:///etc/passwd", "gopher://127.0.0.1/x", "ftp://127.0.0.1/x", "javascript:alert(1)",
      ] {
        let response = try await fixture.request(fixture.path(target))
        #expect(response.status == 403, "\(target)")
        #expect(String(decoding: response.body, as: UTF8.self).contains("only http and https"), "\(target)")
      }
      let otherHost = try await fixture.request(
        fixture.path("http://localhost:\(fixture.origin.port)/normal/x?size=10"))
      #expect(otherHost.status == 403)
      #expect(String(decoding: otherHost.body, as: UTF8.self).contains("localhost"))
      #expect(try await fixture.request("/movie.mp4").status == 400)
      #expect(try await fixture.request("/movie.mp4?url=").status == 400)
      #expect(try await fixture.request("/x?url=not%20a%20url").status == 400)
      // An origin URL past 8192 bytes: 414 saying so (it was a 400 about a url parameter it did not have).
      let long = try await fixture.request(
        fixture.path(fixture.origin.url(.normal, String(repeating: "a", count: 9000), size: 10)))
      #expect(long.status == 414, "\(long.status)")
      #expect(String(decoding: long.body, as: UTF8.self).contains("at most 8192"))
      let post = try await fixture.request(
        fixture.path(fixture.origin.url(.normal, "m", size: 10)), method: "POST")
      #expect(post.status == 405)
      #expect(post.header("Allow") == "GET, HEAD")
      // Nothing from the URL reaches a header, whatever it holds.
      let injected =
        fixture.path(fixture.origin.url(.normal, "inj", size: 10, query: "a=%0d%0aX-Evil:%201"))
        + "%0D%0AX-Injected:%201"
      let response = try await fixture.request(injected)
      #expect(response.header("X-Injected") == nil)
      #expect(response.header("X-Evil") == nil)
      #expect(fixture.origin.allRequests().allSatisfy { $0.name != "x" }, "refused URLs are never fetched")
    }
  }

  @Test func originFailuresBecomeStatusCodes() async throws {
    // A listener that accepts connections and never answers: the origin times out.
    let silent = try SilentListener()
    defer { silent.close() }
    // The idle timeout leaves room for a loaded machine: the in-process origin must answer within it (at 2 s,
    // a full local run once saw the 404 come too late and become a 504).
    try await withProxy(arguments: ["--connect-timeout", "2", "--idle-timeout", "5", "--retries", "0"]) {
      fixture in
      let missing = try await fixture.request(fixture.path("\(fixture.origin.baseURL)/nosuchmode/x"))
      #expect(missing.status == 404)
      let failing = try await fixture.request(
        fixture.path(fixture.origin.url(.flaky, "fails", size: 1000, query: "failures=5")))
      // The origin's own 500 and page, relayed once the retries are spent (not stored).
      #expect(failing.status == 500)
      #expect(String(decoding: failing.body, as: UTF8.self).hasPrefix("flaky: failure"))
      #expect(failing.header("Cache-Status") == "MediaCache; fwd=miss; fwd-status=500")
      let wrong = try await fixture.request(fixture.path(fixture.origin.url(.gzip, "gz", size: 1000)))
      #expect(wrong.status == 502)
      let timeout = try await fixture.request(fixture.path("http://127.0.0.1:\(silent.port)/x.mp4"))
      #expect(timeout.status == 504)
      let refused = try await fixture.request(fixture.path("http://127.0.0.1:1/x.mp4"))
      #expect(refused.status == 502)
      #expect(try await fixture.metric("mediacache_proxy_origin_errors_total") ?? 0 >= 4)
      // The proxy still serves.
      let fine = try await fixture.request(fixture.path(fixture.origin.url(.normal, "fine", size: 5000)))
      #expect(fine.status == 200)
      #expect(fine.body == TestOrigin.bytes(name: "fine", size: 5000))
    }
  }

  /// Two players read the same object at once; one goes away mid-body. The other gets every byte from the one
  /// shared origin request, which must not be cancelled while a reader remains. The staying player starts
  /// first (it is reading from the request when the other joins): a player that starts so late that it reads
  /// the first chunks from the cache is not on the request yet, and if the other leaves then, the request is
  /// cancelled and the late player asks for what is missing with a new one (seen once under load).
  @Test func aDisconnectDoesNotCancelAFetchAnotherReaderShares() async throws {
    try await withProxy { fixture in
      let size = 6 << 20
      let path = fixture.path(fixture.origin.url(.slow, "shared", size: size, query: "delay-ms=2"))
      let port = fixture.endpoint.port
      async let stayer = fixture.request(path)
      for _ in 0..<500 where fixture.origin.requests(for: "shared").isEmpty {
        try await Task.sleep(for: .milliseconds(10))
      }
      async let leaver: Int = blocking {
        let connection = try RawHTTPConnection(port: port)
        defer { connection.close() }
        try connection.sendRequest("GET", path)
        var received = 0
        _ = try? connection.readResponse { bytes in
          received += bytes.count
          if received >= 1 << 20 { connection.close() }
        }
        return received
      }
      let (left, full) = try await (leaver, stayer)
      #expect(left >= 1 << 20 && left < size)
      #expect(full.status == 200)
      let sharedBody = sameBytes(full.body, TestOrigin.bytes(name: "shared", size: size))
      #expect(sharedBody.equal, "\(sharedBody)")
      // One run of requests (the proxy asks in windows ahead of its players): every byte sent once.
      let requests = fixture.origin.requests(for: "shared")
      #expect(requests.reduce(0) { $0 + $1.bodyBytesSent } == size, "\(requests)")
      #expect(Set(requests.compactMap(\.range)).count == requests.count, "\(requests)")
    }
  }

  /// Two requests sent at once on one connection (pipelined), the second answered over about 3 s, longer than
  /// the 1 s client timeout: both arrive whole and in order. The timeout counts only time without a request;
  /// before, the first response's end re-armed it while the second was already being answered.
  @Test func pipelinedRequestsOutliveTheClientTimeout() async throws {
    try await withProxy(arguments: ["--retries", "1", "--client-timeout", "1"]) { fixture in
      let size = 300_000
      let fast = fixture.path(fixture.origin.url(.normal, "pipe-fast", size: 1000))
      let slow = fixture.path(fixture.origin.url(.slow, "pipe-slow", size: size, query: "delay-ms=150"))
      let port = fixture.endpoint.port
      let (first, second) = try await blocking {
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 30)
        defer { connection.close() }
        try connection.send(
          "GET \(fast) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET \(slow) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return (try connection.readResponse(), try connection.readResponse())
      }
      #expect(first.status == 200)
      #expect(first.body == TestOrigin.bytes(name: "pipe-fast", size: 1000))
      #expect(second.status == 200)
      let body = sameBytes(second.body, TestOrigin.bytes(name: "pipe-slow", size: size))
      #expect(body.equal, "\(body)")
    }
  }

  /// A player's first request for a small range (`Range: bytes=0-65535`, less than a chunk) leaves the chunk
  /// cached: the same request again is a hit the origin never sees. Before, the proxy dropped the read after
  /// its last byte, which cancelled the flight finishing the chunk, so every such request went to the origin.
  @Test func aSmallRangeThroughTheProxyCachesItsChunk() async throws {
    try await withProxy { fixture in
      let size = 3_000_000
      // 16 KiB every 5 ms: the client has its 64 KiB long before the flight has the 1 MiB chunk.
      let path = fixture.path(fixture.origin.url(.slow, "small-range", size: size, query: "delay-ms=5"))
      let whole = TestOrigin.bytes(name: "small-range", size: size)
      for round in 0..<3 {
        let response = try await fixture.request(path, headers: [("Range", "bytes=0-65535")])
        #expect(response.status == 206)
        #expect(response.body == Array(whole[0..<65536]), "round \(round)")
        // The flight finishes the chunk (~0.3 s) after the response; the next round comes after that.
        try await Task.sleep(for: .seconds(1))
      }
      let requests = fixture.origin.requests(for: "small-range")
      #expect(requests.count == 1, "\(requests)")
    }
  }

  /// A client that sends a request head announcing a body and then nothing is closed after the client
  /// timeout, like an idle one (the timer restarts on each request part and stops once the request is
  /// complete). An HTTP/1.0 keep-alive client reading a body of unknown length gets it ended by the close. An
  /// absolute-form target (`GET http://host:port/metrics`) names the proxy's own path.
  @Test func unfinishedRequestsHTTP10AndAbsoluteTargets() async throws {
    try await withProxy(arguments: ["--retries", "1", "--client-timeout", "1"]) { fixture in
      let port = fixture.endpoint.port
      let unfinished = try await blocking { () -> String? in
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 10)
        defer { connection.close() }
        try connection.send("POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc")
        return try connection.readLine()  // nil: closed by the proxy; a timeout throws
      }
      #expect(unfinished == nil)

      let chunked = fixture.path(fixture.origin.url(.chunked, "http10", size: 200_000))
      let http10 = try await blocking { () -> RawHTTPResponse in
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 10)
        defer { connection.close() }
        try connection.send("GET \(chunked) HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        return try connection.readResponse()  // no length: the body runs to the close (a timeout throws)
      }
      #expect(http10.status == 200)
      // While the length is unknown when the head goes out, the body runs to the close; a fast origin may have
      // ended (and told its length) before that, and then the response has a Content-Length and may stay open.
      if http10.header("Content-Length") == nil {
        #expect(http10.header("Connection")?.lowercased() == "close")
      } else {
        #expect(http10.header("Content-Length") == "200000")
      }
      #expect(http10.body == TestOrigin.bytes(name: "http10", size: 200_000))

      let absolute = try await blocking { () -> RawHTTPResponse in
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 10)
        defer { connection.close() }
        try connection.sendRequest("GET", "http://127.0.0.1:\(port)/metrics")
        return try connection.readResponse()
      }
      #expect(absolute.status == 200)
      #expect(String(decoding: absolute.body, as: UTF8.self).contains("mediacache_proxy_requests_total"))
    }
  }

  /// A keep-alive connection whose requests come more often than the client timeout stays open longer than
  /// the timeout (each request moves the deadline on; the connection's one timer, firing early, waits on),
  /// and is closed once it has been idle for the timeout.
  @Test func aConnectionInUseOutlivesTheClientTimeoutAndClosesOnceIdle() async throws {
    try await withProxy(arguments: ["--retries", "1", "--client-timeout", "1"]) { fixture in
      let port = fixture.endpoint.port
      let path = fixture.path(fixture.origin.url(.normal, "kept-alive", size: 10_000))
      let (statuses, afterIdle) = try await blocking { () -> ([Int], String?) in
        let connection = try RawHTTPConnection(port: port, timeoutSeconds: 10)
        defer { connection.close() }
        var statuses: [Int] = []
        for _ in 0..<6 {  // a request every 0.6 s: 3.6 s on one connection
          try connection.sendRequest("GET", path)
          statuses.append(try connection.readResponse().status)
          usleep(600_000)
        }
        usleep(1_000_000)  // idle 1.6 s in all
        return (statuses, try connection.readLine())  // nil: closed by the proxy; a timeout throws
      }
      #expect(statuses == Array(repeating: 200, count: 6))
      #expect(afterIdle == nil)
    }
  }

  @Test func metricsCountAMissThenAHit() async throws {
    try await withProxy { fixture in
      let path = fixture.path(fixture.origin.url(.normal, "metered", size: 2_000_000))
      #expect(try await fixture.metric("mediacache_proxy_cache_misses_total") == 0)
      #expect(try await fixture.request(path).status == 200)
      #expect(try await fixture.metric("mediacache_proxy_cache_misses_total") == 1)
      #expect(try await fixture.metric("mediacache_proxy_cache_hits_total") == 0)
      let fromOrigin = try await fixture.metric("mediacache_proxy_served_bytes_total{source=\"origin\"}") ?? 0
      #expect(fromOrigin > 0)
      #expect(try await fixture.request(path).status == 200)
      #expect(try await fixture.metric("mediacache_proxy_cache_hits_total") == 1)
      #expect(try await fixture.metric("mediacache_proxy_cache_misses_total") == 1)
      #expect(
        try await fixture.metric("mediacache_proxy_served_bytes_total{source=\"origin\"}") == fromOrigin,
        "the hit took nothing from the origin")
      let fromCache = try await fixture.metric("mediacache_proxy_served_bytes_total{source=\"cache\"}") ?? 0
      #expect(fromCache + fromOrigin == 4_000_000)
      // The object count comes from a scan reused for up to 2 s.
      var objects: Double?
      for _ in 0..<30 where objects != 1 {
        objects = try await fixture.metric("mediacache_cache_objects")
        try await Task.sleep(for: .milliseconds(200))
      }
      #expect(objects == 1)
      let metrics = try await fixture.request("/metrics")
      #expect(metrics.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
    }
  }
}

/// A TCP socket on 127.0.0.1 that listens but never accepts or answers (a hung origin, a port taken), at a free
/// port; with `reusePort`, with `SO_REUSEPORT` set (a server that shares its port).
final class SilentListener: Sendable {
  let fd: Int32
  let port: Int

  init(reusePort: Bool = false) throws {
    #if canImport(Glibc)
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
      let fd = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    self.fd = fd
    var one: Int32 = 1
    if reusePort, setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) != 0 {
      throw RawHTTPError(description: "silent listener: SO_REUSEPORT: errno \(errno)")
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
        bind(fd, pointer, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, pointer, &length) == 0
      }
    }
    guard bound else { throw RawHTTPError(description: "silent listener: errno \(errno)") }
    port = Int(UInt16(bigEndian: address.sin_port))
  }

  func close() {
    #if canImport(Glibc)
      _ = Glibc.close(fd)
    #else
      _ = Darwin.close(fd)
    #endif
  }
}

/// The library API: a `ProxyServer` started in this process, stopped by cancelling its task.
@Suite struct ProxyServerInProcessTests {
  /// A proxy over `reader` on `port` (0: a free one), running in a task; returns once it listens.
  func start(_ reader: CachingReader, port: Int) async throws -> (
    Task<Void, any Error>, ProxyServer, ProxyServer.Endpoint
  ) {
    let (proxy, endpoint, server) = try await startInProcessProxy(reader, .init(port: port))
    return (server, proxy, endpoint)
  }

  @Test func runsUntilCancelledAndServesThroughTheReader() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    let cache = try MediaCache(configuration: .init(directory: FilePath(directory.path), maxSize: nil))
    let reader = CachingReader(cache: cache)
    let (server, proxy, endpoint) = try await start(reader, port: 0)
    #expect(endpoint.host == "127.0.0.1" && endpoint.port > 0)
    let url = origin.url(.normal, "inprocess", size: 1_500_000)
    let response = try await blocking {
      try rawRequest(port: endpoint.port, ProxyServer.proxyPath(for: url), headers: [("Range", "bytes=-100")])
    }
    #expect(response.status == 206)
    let body = sameBytes(
      response.body, TestOrigin.bytes(name: "inprocess", size: 1_500_000, range: 1_499_900..<1_500_000))
    #expect(body.equal, "\(body)")
    await proxy.metrics.countsSettled()
    #expect(proxy.metrics.requests(statusClass: 2) == 1)
    #expect(proxy.endpoint == endpoint)
    #expect(proxy.proxyURL(for: url) == ProxyServer.proxyURL(for: url, endpoint: endpoint))
    #expect(
      ProxyServer.proxyURL(for: url, endpoint: endpoint)
        == "\(endpoint)/http/127.0.0.1:\(origin.port)/normal/inprocess?size=1500000")
    #expect(
      ProxyServer.queryFormPath(for: url)
        == "/inprocess?url=http%3A%2F%2F127.0.0.1%3A\(origin.port)%2Fnormal%2Finprocess%3Fsize%3D1500000")
    server.cancel()
    _ = await server.result
    #expect(proxy.endpoint == nil)
    try await reader.client.shutdown()
    try await origin.shutdown()
  }
  /// An app suspended and resumed (docs/APPLE.md): the proxy is stopped with the app's task and started
  /// again on the same port (a new `ProxyServer` over the same cache), and a URL the player was given before
  /// works again, from the cache.
  @Test func aProxyRestartedOnTheSamePortKeepsEarlierURLsWorking() async throws {
    try await withReader(chunkSize: 1 << 20, configuration: .init()) { reader, origin, _ in
      let url = origin.url(.normal, "resumed", size: 700_000)
      let (first, _, endpoint) = try await start(reader, port: 0)
      let path = ProxyServer.proxyPath(for: url)
      let before = try await blocking { try rawRequest(port: endpoint.port, path) }
      #expect(before.status == 200 && before.body.count == 700_000)
      // Suspended: the app's task for the proxy is cancelled, its socket closed.
      first.cancel()
      _ = await first.result
      #expect(throws: (any Error).self) { try rawRequest(port: endpoint.port, path) }
      // Resumed: the same port at once (SO_REUSEADDR), the same URL, answered from the cache.
      let (second, _, again) = try await start(reader, port: endpoint.port)
      #expect(again == endpoint)
      let originRequests = origin.allRequests().count
      let after = try await blocking { try rawRequest(port: endpoint.port, path) }
      #expect(after.status == 200 && after.body == before.body)
      #expect(origin.allRequests().count == originRequests)
      second.cancel()
      _ = await second.result
    }
  }
}
