import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// Checks the test origin itself with `RawHTTPConnection` (MediaCacheTestSupport), a tiny blocking HTTP/1.1
// client over a raw socket: what goes over the wire is exactly what the origin wrote.

/// What `streamLargeObject` saw.
struct LargeStream {
  var response: RawHTTPResponse
  var received = 0
  var mismatches = 0
  /// The largest RSS growth of the watched process over the whole request.
  var rssGrowth = 0
}

/// GETs `/normal/<name>?size=size` from `port`, first without reading for `pause` (the origin must stop at
/// what the socket buffers hold), then reading everything, checking every byte against `TestOrigin.fill`
/// and sampling the RSS of `pid` every 16 MiB.
/// `path` replaces the origin path (to read the object through a proxy).
func streamLargeObject(
  port: Int, name: String, size: Int, pid: String, pause: Duration, path: String? = nil,
  whilePaused: () -> Void
) async throws -> LargeStream {
  let before = residentBytes(of: pid) ?? 0
  let connection = try RawHTTPConnection(port: port)
  defer { connection.close() }
  try connection.sendRequest("GET", path ?? TestOrigin.path(.normal, name, size: size))
  try await Task.sleep(for: pause)
  whilePaused()
  var peak = residentBytes(of: pid) ?? before
  var offset = 0
  var mismatches = 0
  var expected = [UInt8](repeating: 0, count: 256 * 1024)
  let response = try connection.readResponse { bytes in
    if expected.count < bytes.count { expected = [UInt8](repeating: 0, count: bytes.count) }
    expected.withUnsafeMutableBytes { raw in
      let slice = UnsafeMutableRawBufferPointer(rebasing: raw[0..<bytes.count])
      TestOrigin.fill(slice, name: name, offset: offset)
      if memcmp(slice.baseAddress!, bytes.baseAddress!, bytes.count) != 0 { mismatches += 1 }
    }
    let previous = offset
    offset += bytes.count
    if previous >> 24 != offset >> 24 { peak = max(peak, residentBytes(of: pid) ?? 0) }
  }
  peak = max(peak, residentBytes(of: pid) ?? 0)
  return LargeStream(response: response, received: offset, mismatches: mismatches, rssGrowth: peak - before)
}

// MARK: - Tests

@Suite struct TestOriginTests {
  @Test func bytesAreAPureFunctionOfNameVersionAndOffset() {
    let whole = TestOrigin.bytes(name: "clip", size: 10_000)
    #expect(whole.count == 10_000)
    #expect(TestOrigin.bytes(name: "clip", size: 10_000) == whole)
    for range in [0..<1, 3..<5, 7..<9, 1..<8, 5..<4_099, 8..<16, 9_990..<10_000, 13..<13] {
      #expect(TestOrigin.bytes(name: "clip", size: 10_000, range: range) == Array(whole[range]), "\(range)")
    }
    // Clamped to the object.
    #expect(TestOrigin.bytes(name: "clip", size: 10_000, range: 9_000..<20_000) == Array(whole[9_000...]))
    #expect(TestOrigin.bytes(name: "clip", size: 100) == Array(whole[..<100]))
    var filled = [UInt8](repeating: 0, count: 777)
    filled.withUnsafeMutableBytes { TestOrigin.fill($0, name: "clip", offset: 1_001) }
    #expect(filled == Array(whole[1_001..<1_778]))
    // Other names and versions give other bytes; the bytes look random.
    #expect(TestOrigin.bytes(name: "clip2", size: 10_000) != whole)
    #expect(TestOrigin.bytes(name: "clip", size: 10_000, version: 1) != whole)
    #expect(Set(whole).count > 250)
    #expect(TestOrigin.bytes(name: "clip", size: 0).isEmpty)
    #expect(TestOrigin.etag(name: "clip", version: 3) == "\"clip-v3\"")
    #expect(TestOrigin.lastModified() == "Mon, 01 Jan 2024 00:00:00 GMT")
    #expect(TestOrigin.lastModified(version: 1) == "Tue, 02 Jan 2024 00:00:00 GMT")
    #expect(TestOrigin.lastModified(version: 60) == "Fri, 01 Mar 2024 00:00:00 GMT")
  }

  @Test func normalFullBodyHeadAndKeepAlive() async throws {
    try await withOrigin { origin in
      #expect(origin.baseURL == "http://127.0.0.1:\(origin.port)")
      #expect(origin.url(.normal, "clip", size: 5) == "\(origin.baseURL)/normal/clip?size=5")
      let size = 300_000
      let expected = TestOrigin.bytes(name: "clip", size: size)
      let connection = try RawHTTPConnection(port: origin.port)
      defer { connection.close() }
      try connection.sendRequest("GET", TestOrigin.path(.normal, "clip", size: size))
      let response = try connection.readResponse()
      #expect(response.status == 200)
      #expect(response.header("Content-Length") == "\(size)")
      #expect(response.header("Content-Type") == "video/mp4")
      #expect(response.header("Accept-Ranges") == "bytes")
      #expect(response.header("ETag") == "\"clip-v0\"")
      #expect(response.header("Last-Modified") == "Mon, 01 Jan 2024 00:00:00 GMT")
      #expect(response.header("Content-Range") == nil)
      #expect(response.header("Transfer-Encoding") == nil)
      #expect(response.isComplete)
      #expect(response.body == expected)

      // HEAD on the same connection: the GET headers, no body; the connection stays usable.
      try connection.sendRequest(
        "HEAD", TestOrigin.path(.normal, "clip", size: size), headers: [("Range", "bytes=0-9")])
      let head = try connection.readResponse(method: "HEAD")
      #expect(head.status == 200)
      #expect(head.header("Content-Length") == "\(size)")
      #expect(head.header("ETag") == "\"clip-v0\"")
      try connection.sendRequest(
        "GET", TestOrigin.path(.normal, "clip", size: size), headers: [("Range", "bytes=0-9")])
      let again = try connection.readResponse()
      #expect(again.status == 206)
      #expect(again.body == Array(expected[0..<10]))

      let records = try await origin.waitForCompletedRequests(for: "clip", count: 3)
      #expect(records.map(\.method) == ["GET", "HEAD", "GET"])
      #expect(records.map(\.status) == [200, 200, 206])
      #expect(records.map(\.bodyBytesSent) == [size, 0, 10])
      #expect(Set(records.map(\.connectionID)).count == 1)
      #expect(records.allSatisfy { !$0.clientDisconnected })

      // Asking to close: the origin says so and closes.
      let closing = try RawHTTPConnection(port: origin.port)
      try closing.sendRequest(
        "GET", TestOrigin.path(.normal, "clip", size: 10), headers: [("Connection", "close")])
      let closed = try closing.readResponse()
      #expect(closed.status == 200 && closed.header("Connection") == "close")
      #expect(try closing.serverClosed())
    }
  }

  @Test(arguments: [
    ("bytes=0-0", 0..<1), ("bytes=10-99", 10..<100), ("bytes=100-", 100..<10_000),
    ("bytes=-50", 9_950..<10_000),
    ("bytes=9990-50000", 9_990..<10_000), ("bytes=-20000", 0..<10_000), ("bytes=9999-9999", 9_999..<10_000),
    ("bytes=65530-65545", 65_530..<65_546),
  ])
  func normalRanges(header: String, expected: Range<Int>) async throws {
    try await withOrigin { origin in
      let size = expected.lowerBound >= 10_000 ? 100_000 : 10_000
      let response = try rawRequest(
        origin, TestOrigin.path(.normal, "r", size: size), headers: [("Range", header)])
      #expect(response.status == 206)
      #expect(
        response.header("Content-Range") == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(size)")
      #expect(response.header("Content-Length") == "\(expected.count)")
      #expect(response.body == TestOrigin.bytes(name: "r", size: size, range: expected))
      let record = try #require(try await origin.waitForCompletedRequests(for: "r", count: 1).first)
      #expect(record.range == header)
      #expect(record.status == 206 && record.bodyBytesSent == expected.count)
    }
  }

  @Test func unsatisfiableAndIgnoredRanges() async throws {
    try await withOrigin { origin in
      let path = TestOrigin.path(.normal, "u", size: 1_000)
      for header in ["bytes=1000-", "bytes=1000-2000", "bytes=5000-5001", "bytes=-0"] {
        let response = try rawRequest(origin, path, headers: [("Range", header)])
        #expect(response.status == 416, "\(header)")
        #expect(response.header("Content-Range") == "bytes */1000", "\(header)")
        #expect(response.bodyCount == 0)
      }
      let empty = try rawRequest(
        origin, TestOrigin.path(.normal, "e", size: 0), headers: [("Range", "bytes=0-")])
      #expect(empty.status == 416 && empty.header("Content-Range") == "bytes */0")
      // Malformed, multiple or non-byte ranges are ignored: the full body.
      for header in ["bytes=5-1", "bytes=0-1,5-6", "items=0-1", "bytes=abc", "bytes=+1-2"] {
        let response = try rawRequest(origin, path, headers: [("Range", header)])
        #expect(response.status == 200, "\(header)")
        #expect(response.body == TestOrigin.bytes(name: "u", size: 1_000), "\(header)")
      }
    }
  }

  @Test func ifRangeAndConditionalRequests() async throws {
    try await withOrigin { origin in
      let size = 20_000
      let path = TestOrigin.path(.normal, "v", size: size)
      let v0 = TestOrigin.bytes(name: "v", size: size)
      func get(_ headers: [(String, String)]) throws -> RawHTTPResponse {
        try rawRequest(origin, path, headers: headers)
      }

      let matching = try get([("Range", "bytes=100-199"), ("If-Range", "\"v-v0\"")])
      #expect(matching.status == 206 && matching.body == Array(v0[100..<200]))
      let byDate = try get([("Range", "bytes=100-199"), ("If-Range", TestOrigin.lastModified())])
      #expect(byDate.status == 206)
      for stale in ["\"v-v1\"", "W/\"v-v0\"", "Tue, 02 Jan 2024 00:00:00 GMT", "garbage"] {
        let response = try get([("Range", "bytes=100-199"), ("If-Range", stale)])
        #expect(response.status == 200, "\(stale)")
        #expect(response.header("Content-Range") == nil)
        #expect(response.body == v0, "\(stale)")
      }

      // A new version: new bytes and validators; the old ETag no longer matches.
      origin.setVersion(name: "v", to: 1)
      #expect(origin.version(of: "v") == 1)
      #expect(origin.version(of: "other") == 0)
      let v1 = TestOrigin.bytes(name: "v", size: size, version: 1)
      let changed = try get([("Range", "bytes=100-199"), ("If-Range", "\"v-v0\"")])
      #expect(changed.status == 200)
      #expect(changed.header("ETag") == "\"v-v1\"")
      #expect(changed.header("Last-Modified") == "Tue, 02 Jan 2024 00:00:00 GMT")
      #expect(changed.body == v1 && v1 != v0)
      let current = try get([("Range", "bytes=100-199"), ("If-Range", "\"v-v1\"")])
      #expect(current.status == 206 && current.body == Array(v1[100..<200]))

      // Revalidation.
      #expect(try get([("If-None-Match", "\"v-v1\"")]).status == 304)
      #expect(try get([("If-None-Match", "\"a\", W/\"v-v1\"")]).status == 304)
      #expect(try get([("If-None-Match", "\"v-v0\"")]).status == 200)
      #expect(try get([("If-Modified-Since", "Tue, 02 Jan 2024 00:00:00 GMT")]).status == 304)
      let notModified = try get([("If-None-Match", "\"v-v1\"")])
      #expect(notModified.header("ETag") == "\"v-v1\"" && notModified.bodyCount == 0)

      // A size override makes the same URL another length.
      origin.setSize(name: "v", to: 500)
      let shorter = try get([])
      #expect(shorter.header("Content-Length") == "500" && shorter.body == Array(v1[..<500]))
      origin.setSize(name: "v", to: nil)
      #expect(try get([]).bodyCount == size)

      let records = try await origin.waitForCompletedRequests(for: "v", count: 15)
      #expect(records[0].ifRange == "\"v-v0\"" && records[0].range == "bytes=100-199")
      #expect(
        records.map(\.status) == [206, 206, 200, 200, 200, 200, 200, 206, 304, 304, 200, 304, 304, 200, 200])
    }
  }

  @Test func noRangeMode() async throws {
    try await withOrigin { origin in
      let response = try rawRequest(
        origin, TestOrigin.path(.norange, "n", size: 5_000), headers: [("Range", "bytes=10-19")])
      #expect(response.status == 200)
      #expect(response.header("Accept-Ranges") == "none")
      #expect(response.header("Content-Range") == nil)
      #expect(response.header("Content-Length") == "5000")
      #expect(response.header("ETag") == "\"n-v0\"")
      #expect(response.body == TestOrigin.bytes(name: "n", size: 5_000))
    }
  }

  @Test func chunkedMode() async throws {
    try await withOrigin { origin in
      let size = 200_000
      let path = TestOrigin.path(.chunked, "c", size: size)
      let expected = TestOrigin.bytes(name: "c", size: size)
      let connection = try RawHTTPConnection(port: origin.port)
      defer { connection.close() }
      try connection.sendRequest("GET", path)
      let full = try connection.readResponse()
      #expect(full.status == 200)
      #expect(full.isChunked && full.isComplete)
      #expect(full.header("Content-Length") == nil)
      #expect(full.headerCount("Transfer-Encoding") == 1)
      #expect(full.header("ETag") == "\"c-v0\"")
      #expect(full.body == expected)

      try connection.sendRequest("GET", path, headers: [("Range", "bytes=100000-100099")])
      let part = try connection.readResponse()
      #expect(part.status == 206 && part.isChunked)
      #expect(part.header("Content-Range") == "bytes 100000-100099/*")
      #expect(part.body == Array(expected[100_000..<100_100]))

      // HEAD carries no framing and no terminator: the next response on the connection parses.
      try connection.sendRequest("HEAD", path)
      let head = try connection.readResponse(method: "HEAD")
      #expect(head.status == 200 && head.header("Content-Length") == nil)
      try connection.sendRequest("GET", path, headers: [("Range", "bytes=\(size)-")])
      let unsatisfiable = try connection.readResponse()
      #expect(unsatisfiable.status == 416 && unsatisfiable.header("Content-Range") == nil)
      try connection.sendRequest("GET", path, headers: [("Range", "bytes=-10")])
      let suffix = try connection.readResponse()
      #expect(suffix.header("Content-Range") == "bytes 199990-199999/*")
      #expect(suffix.body == Array(expected[199_990...]))
    }
  }

  @Test func lastModifiedOnlyMode() async throws {
    try await withOrigin { origin in
      let path = TestOrigin.path(.lastmod, "l", size: 4_000)
      let expected = TestOrigin.bytes(name: "l", size: 4_000)
      let byDate = try rawRequest(
        origin, path, headers: [("Range", "bytes=0-99"), ("If-Range", "Mon, 01 Jan 2024 00:00:00 GMT")])
      #expect(byDate.status == 206)
      #expect(byDate.header("ETag") == nil)
      #expect(byDate.header("Last-Modified") == "Mon, 01 Jan 2024 00:00:00 GMT")
      #expect(byDate.body == Array(expected[0..<100]))
      let byTag = try rawRequest(origin, path, headers: [("Range", "bytes=0-99"), ("If-Range", "\"l-v0\"")])
      #expect(byTag.status == 200 && byTag.body == expected)
      origin.setVersion(name: "l", to: 2)
      let stale = try rawRequest(
        origin, path, headers: [("Range", "bytes=0-99"), ("If-Range", "Mon, 01 Jan 2024 00:00:00 GMT")])
      #expect(stale.status == 200)
      #expect(stale.header("Last-Modified") == "Wed, 03 Jan 2024 00:00:00 GMT")
      #expect(stale.body == TestOrigin.bytes(name: "l", size: 4_000, version: 2))
    }
  }

  @Test func truncatedModeClosesAfterHalfTheBody() async throws {
    try await withOrigin { origin in
      let size = 100_000
      let expected = TestOrigin.bytes(name: "t", size: size)
      let connection = try RawHTTPConnection(port: origin.port)
      defer { connection.close() }
      try connection.sendRequest("GET", TestOrigin.path(.truncated, "t", size: size))
      let full = try connection.readResponse()
      #expect(full.status == 200)
      #expect(full.header("Content-Length") == "\(size)")
      #expect(!full.isComplete)
      #expect(full.body == Array(expected[..<50_000]))
      #expect(connection.sawEOF)

      let ranged = try rawRequest(
        origin, TestOrigin.path(.truncated, "t", size: size), headers: [("Range", "bytes=1000-20999")])
      #expect(ranged.status == 206)
      #expect(ranged.header("Content-Range") == "bytes 1000-20999/100000")
      #expect(ranged.header("Content-Length") == "20000")
      #expect(!ranged.isComplete)
      #expect(ranged.body == Array(expected[1_000..<11_000]))

      let records = try await origin.waitForCompletedRequests(for: "t", count: 2)
      #expect(records.map(\.bodyBytesSent) == [50_000, 10_000])
      #expect(records.allSatisfy { !$0.clientDisconnected })
    }
  }

  @Test func wrongRangeMode() async throws {
    try await withOrigin { origin in
      let size = 10_000
      let path = TestOrigin.path(.wrongrange, "w", size: size)
      let expected = TestOrigin.bytes(name: "w", size: size)
      let forward = try rawRequest(origin, path, headers: [("Range", "bytes=0-999")])
      #expect(forward.status == 206)
      #expect(forward.header("Content-Range") == "bytes 1000-1999/10000")
      #expect(forward.body == Array(expected[1_000..<2_000]))
      let backward = try rawRequest(origin, path, headers: [("Range", "bytes=9500-9999")])
      #expect(backward.header("Content-Range") == "bytes 8500-8999/10000")
      #expect(backward.body == Array(expected[8_500..<9_000]))
      let whole = try rawRequest(origin, path)
      #expect(whole.status == 200 && whole.body == expected)
      let tiny = try rawRequest(
        origin, TestOrigin.path(.wrongrange, "w2", size: 10), headers: [("Range", "bytes=0-9")])
      #expect(tiny.status == 206 && tiny.header("Content-Range") != "bytes 0-9/10")
    }
  }

  @Test func flakyModeFailsTwiceThenServes() async throws {
    try await withOrigin { origin in
      let path = TestOrigin.path(.flaky, "f", size: 3_000)
      let statuses = try (0..<4).map { _ in try rawRequest(origin, path).status }
      #expect(statuses == [500, 500, 200, 200])
      let served = try rawRequest(origin, path, headers: [("Range", "bytes=10-19")])
      #expect(served.status == 206 && served.body == TestOrigin.bytes(name: "f", size: 3_000, range: 10..<20))
      // Counters are per name, and resettable.
      #expect(try rawRequest(origin, TestOrigin.path(.flaky, "g", size: 3_000)).status == 500)
      origin.resetFlakyCounters()
      #expect(try rawRequest(origin, path).status == 500)
      let once = TestOrigin.path(.flaky, "h", size: 10, query: "failures=1")
      #expect(try (0..<2).map { _ in try rawRequest(origin, once).status } == [500, 200])
      let records = try await origin.waitForCompletedRequests(for: "f", count: 6)
      #expect(records.map(\.status) == [500, 500, 200, 200, 206, 500])
      #expect(records.allSatisfy { $0.mode == "flaky" })
    }
  }

  @Test func slowModeTrickles() async throws {
    try await withOrigin { origin in
      let size = 100 * 1024
      let clock = ContinuousClock()
      let startedSlow = clock.now
      let slow = try rawRequest(origin, TestOrigin.path(.slow, "s", size: size, query: "delay-ms=30"))
      let slowTime = clock.now - startedSlow
      #expect(slow.status == 200 && slow.body == TestOrigin.bytes(name: "s", size: size))
      // 7 pieces of 16 KiB: at least 6 delays of 30 ms before the last one.
      #expect(slowTime >= .milliseconds(170), "\(slowTime)")
      let startedDefault = clock.now
      let ranged = try rawRequest(
        origin, TestOrigin.path(.slow, "s", size: size), headers: [("Range", "bytes=1000-50999")])
      let defaultTime = clock.now - startedDefault
      #expect(
        ranged.status == 206 && ranged.body == TestOrigin.bytes(name: "s", size: size, range: 1_000..<51_000))
      #expect(defaultTime >= .milliseconds(55), "\(defaultTime)")
    }
  }

  @Test func redirectModeChains() async throws {
    try await withOrigin { origin in
      let single = try rawRequest(origin, TestOrigin.path(.redirect, "d", size: 1_234))
      #expect(single.status == 302)
      #expect(single.header("Location") == origin.url(.normal, "d", size: 1_234))
      #expect(single.header("Content-Length") == "0")

      var path = TestOrigin.path(.redirect, "d", size: 1_234, query: "hops=3")
      var hops = 0
      var response = try rawRequest(origin, path)
      while response.status == 302, let location = response.header("Location") {
        hops += 1
        #expect(location.hasPrefix(origin.baseURL))
        path = String(location.dropFirst(origin.baseURL.count))
        response = try rawRequest(origin, path, headers: [("Range", "bytes=0-9")])
      }
      #expect(hops == 3)
      #expect(path == TestOrigin.path(.normal, "d", size: 1_234))
      #expect(
        response.status == 206 && response.body == TestOrigin.bytes(name: "d", size: 1_234, range: 0..<10))
      let records = try await origin.waitForCompletedRequests(for: "d", count: 5)
      #expect(records.map(\.mode) == ["redirect", "redirect", "redirect", "redirect", "normal"])
    }
  }

  @Test func gzipModeSendsARealGzipStream() async throws {
    try await withOrigin { origin in
      let size = 150_000
      let response = try rawRequest(
        origin, TestOrigin.path(.gzip, "z", size: size),
        headers: [("Range", "bytes=0-9"), ("Accept-Encoding", "identity")])
      #expect(response.status == 200)
      #expect(response.header("Content-Encoding") == "gzip")
      #expect(response.header("Accept-Ranges") == "none")
      let body = TestOrigin.gzipBody(name: "z", size: size)
      #expect(response.header("Content-Length") == "\(body.count)")
      #expect(response.body == body)
      #expect(Array(body.prefix(2)) == [0x1F, 0x8B])
      let gzip = "/usr/bin/gzip"
      if FileManager.default.isExecutableFile(atPath: gzip) {
        let directory = try TemporaryDirectory()
        defer { directory.cleanup() }
        try Data(response.body).write(to: URL(fileURLWithPath: directory.file("z.gz")))
        let result = try await run(gzip, ["-dc", directory.file("z.gz")])
        #expect(result.status == 0, "\(result.stderr)")
        #expect([UInt8](result.stdout) == TestOrigin.bytes(name: "z", size: size))
        for emptySize in [0, 65_535] {
          try Data(TestOrigin.gzipBody(name: "y", size: emptySize)).write(
            to: URL(fileURLWithPath: directory.file("y.gz")))
          let decoded = try await run(gzip, ["-dc", directory.file("y.gz")])
          #expect(decoded.status == 0)
          #expect([UInt8](decoded.stdout) == TestOrigin.bytes(name: "y", size: emptySize))
        }
      }
    }
  }

  @Test func badRequests() async throws {
    try await withOrigin { origin in
      #expect(try rawRequest(origin, "/nosuchmode/x?size=1").status == 404)
      #expect(try rawRequest(origin, "/normal/?size=1").status == 404)
      #expect(try rawRequest(origin, "/normal/x").status == 400)
      #expect(try rawRequest(origin, "/normal/x?size=-1").status == 400)
      let post = try rawRequest(
        origin, "/normal/x?size=1", method: "POST", headers: [("Content-Length", "0")])
      #expect(post.status == 405 && post.header("Allow") == "GET, HEAD")
      let records = origin.allRequests()
      #expect(records.count == 5)
      #expect(records.map(\.mode) == ["nosuchmode", "normal", "normal", "normal", "normal"])
    }
  }

  @Test func recordsAndCounters() async throws {
    try await withOrigin { origin in
      _ = try rawRequest(origin, TestOrigin.path(.normal, "a", size: 1_000))
      _ = try rawRequest(
        origin, TestOrigin.path(.normal, "a", size: 1_000),
        headers: [("Range", "bytes=0-99"), ("If-Range", "\"a-v0\""), ("X-Probe", "1")])
      _ = try rawRequest(origin, TestOrigin.path(.normal, "b", size: 10), method: "HEAD")
      let a = try await origin.waitForCompletedRequests(for: "a", count: 2)
      #expect(a.count == 2)
      #expect(a[0].method == "GET" && a[0].path == "/normal/a?size=1000" && a[0].mode == "normal")
      #expect(a[0].name == "a" && a[0].range == nil && a[0].ifRange == nil)
      #expect(
        a[0].status == 200 && a[0].bodyBytesSent == 1_000 && a[0].isComplete && !a[0].clientDisconnected)
      #expect(a[1].range == "bytes=0-99" && a[1].ifRange == "\"a-v0\"" && a[1].headers["x-probe"] == "1")
      #expect(a[1].status == 206 && a[1].bodyBytesSent == 100)
      #expect(a[0].id < a[1].id && a[0].connectionID != a[1].connectionID)
      #expect(origin.totalBodyBytes(for: "a") == 1_100)
      let b = try await origin.waitForCompletedRequests(for: "b", count: 1)
      #expect(b.map(\.method) == ["HEAD"] && origin.totalBodyBytes(for: "b") == 0)
      #expect(origin.allRequests().count == 3)
      origin.resetRecords()
      #expect(origin.allRequests().isEmpty && origin.requests(for: "a").isEmpty)
      #expect(origin.totalBodyBytes(for: "a") == 0)
      await #expect(throws: TestOriginError.self) {
        _ = try await origin.waitForCompletedRequests(for: "a", count: 1, timeout: .milliseconds(50))
      }
    }
  }

  @Test func concurrentClients() async throws {
    try await withOrigin { origin in
      let size = 2_000_000
      let expected = TestOrigin.bytes(name: "p", size: size)
      let failures = Mutex(0)
      DispatchQueue.concurrentPerform(iterations: 16) { index in
        let lower = index * 100_000
        let ok =
          (try? rawRequest(
            origin, TestOrigin.path(.normal, "p", size: size),
            headers: [("Range", "bytes=\(lower)-\(lower + 199_999)")]))
          .map { $0.status == 206 && $0.body == Array(expected[lower..<lower + 200_000]) } ?? false
        if !ok { failures.withLock { $0 += 1 } }
      }
      #expect(failures.withLock { $0 } == 0)
      let records = try await origin.waitForCompletedRequests(for: "p", count: 16)
      #expect(records.count == 16)
      #expect(origin.totalBodyBytes(for: "p") == 16 * 200_000)
    }
  }

  @Test func clientDisconnectMidBodyIsRecorded() async throws {
    try await withOrigin { origin in
      let size = 1 << 30
      let connection = try RawHTTPConnection(port: origin.port)
      try connection.sendRequest("GET", TestOrigin.path(.normal, "big", size: size))
      var received = 0
      _ = try? connection.readResponse { bytes in
        received += bytes.count
        if received >= 1 << 20 { connection.close() }
      }
      connection.close()
      let record = try #require(try await origin.waitForCompletedRequests(for: "big", count: 1).first)
      #expect(record.clientDisconnected)
      #expect(record.status == 200)
      #expect(record.bodyBytesSent >= received && record.bodyBytesSent < size)

      // In slow mode the disconnect is noticed within a few pieces.
      let slow = try RawHTTPConnection(port: origin.port)
      try slow.sendRequest("GET", TestOrigin.path(.slow, "trickle", size: 10 << 20, query: "delay-ms=5"))
      _ = try? slow.readResponse { _ in slow.close() }
      slow.close()
      let slowRecord = try #require(try await origin.waitForCompletedRequests(for: "trickle", count: 1).first)
      #expect(slowRecord.clientDisconnected)
      #expect(slowRecord.bodyBytesSent < 1 << 20)
    }
  }

  @Test func largeObjectStreamsWithBoundedMemory() async throws {
    try await withOrigin { origin in
      // The origin runs in this process: its RSS (coarse: other tests run alongside) must not follow the
      // object size.
      let size = 256 << 20
      var stalled = 0
      let stream = try await streamLargeObject(
        port: origin.port, name: "huge", size: size, pid: "self", pause: .milliseconds(500)
      ) { stalled = origin.requests(for: "huge").first?.bodyBytesSent ?? 0 }
      #expect(stalled < 32 << 20, "origin wrote \(stalled) bytes to a client that reads nothing")
      #expect(stream.response.status == 200 && stream.response.isComplete)
      #expect(stream.response.bodyCount == size && stream.received == size)
      #expect(stream.mismatches == 0)
      // Bounded below the object: the suites running beside it in this process (their in-process origins and
      // readers) grew it by up to 33.5 MiB in one CI run and 65 MiB in another, so the bound here is half the
      // object (a copy of the object would pass it); the precise bound (32 MiB) is checked on the standalone
      // origin below, whose RSS nothing else disturbs.
      #expect(stream.rssGrowth < size / 2, "RSS grew by \(stream.rssGrowth >> 20) MiB streaming 256 MiB")
      let record = try #require(try await origin.waitForCompletedRequests(for: "huge", count: 1).first)
      #expect(record.bodyBytesSent == size && !record.clientDisconnected)
    }
  }

  @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary("mediacache-test-origin"))))
  func standaloneOriginStreamsWithBoundedMemory() async throws {
    // The same in the standalone origin, whose RSS nothing else disturbs.
    let child = try ChildProcess(binary("mediacache-test-origin"), ["--port", "0"])
    try await child.closingInputAfter {
      #expect(await child.waitForLine(timeout: 30) { $0.hasPrefix("listening on http://127.0.0.1:") })
      let line = try #require(child.outputSoFar.split(separator: "\n").first)
      let port = try #require(Int(line.split(separator: ":").last ?? ""))
      let size = 256 << 20
      let stream = try await streamLargeObject(
        port: port, name: "huge", size: size, pid: String(child.pid), pause: .milliseconds(300)
      ) {}
      #expect(stream.response.status == 200 && stream.response.isComplete)
      #expect(stream.received == size && stream.mismatches == 0)
      #expect(
        stream.rssGrowth < 32 << 20, "origin RSS grew by \(stream.rssGrowth >> 20) MiB streaming 256 MiB")
    }
  }

  @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary("mediacache-test-origin"))))
  func standaloneOriginProcess() async throws {
    // Serves until standard input ends.
    let child = try ChildProcess(binary("mediacache-test-origin"), ["--port", "0"])
    #expect(await child.waitForLine(timeout: 30) { $0.hasPrefix("listening on http://127.0.0.1:") })
    let line = try #require(child.outputSoFar.split(separator: "\n").first)
    let port = try #require(Int(line.split(separator: ":").last ?? ""))
    let connection = try RawHTTPConnection(port: port)
    try connection.sendRequest("GET", TestOrigin.path(.normal, "x", size: 1_000))
    let response = try connection.readResponse()
    #expect(response.status == 200 && response.body == TestOrigin.bytes(name: "x", size: 1_000))
    connection.close()
    child.closeInput()
    let result = await child.wait(timeout: 30)
    #expect(result.status == 0, "\(result.stderr)")

    // Serves until SIGTERM.
    let other = try ChildProcess(binary("mediacache-test-origin"), ["0", "--no-stdin"])
    #expect(await other.waitForLine(timeout: 30) { $0.hasPrefix("listening on http://127.0.0.1:") })
    other.closeInput()
    try await Task.sleep(for: .milliseconds(100))
    #expect(other.process.isRunning)
    other.kill(SIGTERM)
    #expect(await other.wait(timeout: 30).status == 0)
  }

  @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary("mediacache-test-origin"))))
  func standaloneOriginCommands() throws {
    let (process, input, output) = try spawningAlone {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: binary("mediacache-test-origin"))
      let input = Pipe()
      let output = Pipe()
      process.standardInput = input
      process.standardOutput = output
      try process.run()
      return (process, input, output)
    }
    var text = ""
    func nextLine() -> String {
      while !text.contains("\n") {
        let data = output.fileHandleForReading.availableData
        if data.isEmpty { break }
        text += String(decoding: data, as: UTF8.self)
      }
      guard let newline = text.firstIndex(of: "\n") else { return text }
      defer { text = String(text[text.index(after: newline)...]) }
      return String(text[..<newline])
    }
    func command(_ line: String) -> String {
      input.fileHandleForWriting.write(Data((line + "\n").utf8))
      return nextLine()
    }
    let listening = nextLine()
    let port = try #require(Int(listening.split(separator: ":").last ?? ""))
    #expect(command("version clip 3") == "ok")
    let response = try rawRequest(port: port, TestOrigin.path(.normal, "clip", size: 100))
    #expect(response.header("ETag") == "\"clip-v3\"")
    #expect(response.body == TestOrigin.bytes(name: "clip", size: 100, version: 3))
    #expect(command("size clip 10") == "ok")
    #expect(try rawRequest(port: port, TestOrigin.path(.normal, "clip", size: 100)).bodyCount == 10)
    var stats = command("stats clip")
    for _ in 0..<200 where !stats.contains("complete=2") {
      usleep(10_000)
      stats = command("stats clip")
    }
    #expect(stats == "stats clip requests=2 complete=2 bytes=110 disconnected=0 statuses=200,200")
    #expect(command("reset-records") == "ok")
    #expect(command("stats clip") == "stats clip requests=0 complete=0 bytes=0 disconnected=0 statuses=")
    #expect(command("reset-flaky") == "ok")
    #expect(command("bogus").hasPrefix("error:"))
    try input.fileHandleForWriting.close()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
  }
}
