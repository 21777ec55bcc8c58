import Foundation
import MediaCacheTestSupport
import Testing

/// The proxy's `PUT /preload` and `GET /preload` against the real binary and a file origin: a feed's next
/// items are preloaded and reported; bad bodies get a 4xx with the reason and change nothing.
@Suite struct PreloadEndpointTests {
  /// Sends `method /preload` with `body` and returns the response.
  func preload(_ port: Int, _ method: String, _ body: String = "") throws -> RawHTTPResponse {
    let connection = try RawHTTPConnection(port: port)
    defer { connection.close() }
    try connection.sendRequest(
      method, "/preload",
      headers: [("Content-Type", "application/json"), ("Content-Length", "\(body.utf8.count)")])
    try connection.send(body)
    return try connection.readResponse()
  }

  struct Report: Decodable {
    struct Item: Decodable {
      var url: String
      var distance: Int
      var seconds: Double?
      var state: String
      var plannedBytes: Int64?
      var fetchedBytes: Int64
      var cachedSeconds: Double?
    }
    var items: [Item]
  }

  @Test func aFeedsNextItemsArePreloadedAndReported() async throws {
    try await withTemporaryDirectory { directory in
      try await withFileOrigin { origin in
        let (proxy, port) = try await startProxy(cache: "\(directory)/cache", [])
        defer { proxy.kill() }
        let feed = [
          origin.url(file: "faststart.mp4"), origin.url(file: "tail-index.mp4"),
          // As a proxy request target (path form), as a player would have it.
          "/http/127.0.0.1:\(origin.port)/files/hls/v0/index.m3u8",
        ]
        let body = try String(decoding: JSONEncoder().encode(["items": feed]), as: UTF8.self)
          .replacingOccurrences(of: "}", with: ",\"current\":0,\"seconds\":[2,1]}")
        let put = try await blocking { try preload(port, "PUT", body) }
        #expect(put.status == 204, "\(String(decoding: put.body, as: UTF8.self))")
        let report = try await waitForPreload(port) { $0.items.allSatisfy { $0.state == "done" } }
        #expect(report.items.map(\.distance) == [1, 2])
        #expect(report.items.map(\.seconds) == [2, 1])
        #expect(report.items.map(\.cachedSeconds) == [2, 1])
        #expect(report.items.map(\.state) == ["done", "done"], "\(report.items)")
        #expect(report.items.first?.url == origin.url(file: "tail-index.mp4"))
        #expect(report.items.first?.plannedBytes == 79_300)
        #expect(report.items.last?.url.hasSuffix("/files/hls/v0/index.m3u8") == true)
        let metrics = String(
          decoding: try await blocking { try rawRequest(port: port, "/metrics") }.body, as: UTF8.self)
        let fetched = report.items.reduce(0) { $0 + $1.fetchedBytes }
        #expect(
          fetched > 0 && metrics.contains("mediacache_preload_fetched_bytes_total \(fetched)\n"), "\(metrics)"
        )
      }
    }
  }

  /// Preloads `next` (the item after the one being played, `current`) for 2 s through a fresh proxy on
  /// `cache`, and returns the report once it is done or failed.
  func preloadNext(_ next: String, after current: String, cache: String) async throws
    -> Report
  {
    let (proxy, port) = try await startProxy(cache: cache, [])
    defer { proxy.kill() }
    let body = try String(decoding: JSONEncoder().encode(["items": [current, next]]), as: UTF8.self)
      .replacingOccurrences(of: "}", with: ",\"current\":0,\"seconds\":[2]}")
    let put = try await blocking { try preload(port, "PUT", body) }
    #expect(put.status == 204, "\(String(decoding: put.body, as: UTF8.self))")
    return try await waitForPreload(port) { $0.items.allSatisfy { ["done", "failed"].contains($0.state) } }
  }

  /// A playlist behind a redirect is preloaded from where it led: its segments resolve against that URL, as
  /// a player's would (before, they resolved against the URL asked: a 404, and the item failed).
  @Test func aPlaylistBehindARedirectIsPreloadedFromWhereItLed() async throws {
    try await withTemporaryDirectory { directory in
      try await withFileOrigin { origin in
        let redirecting = ManifestsInTheWildTests.redirecting(
          origin, to: "hls/v0/index.m3u8", as: "index.m3u8")
        let report = try await preloadNext(
          redirecting, after: origin.url(file: "faststart.mp4"), cache: "\(directory)/cache")
        #expect(report.items.map(\.state) == ["done"], "\(report.items)")
        let segment = origin.requests(for: "hls/v0/seg000.ts")
        #expect(!segment.isEmpty && segment.allSatisfy { $0.status / 100 == 2 }, "\(origin.allRequests())")
      }
    }
  }

  /// A master playlist's variant is preloaded with the audio a player plays with it: its group's
  /// `DEFAULT=YES` rendition, from its start (not the other languages).
  @Test func aVariantIsPreloadedWithItsDefaultAudio() async throws {
    let root = try FetchHLSCommandTests.makeRenditionsRoot()
    defer { root.cleanup() }
    try await withTemporaryDirectory { directory in
      try await withFileOrigin(root: root.path) { origin in
        let report = try await preloadNext(
          origin.url(file: "master.m3u8"), after: origin.url(file: "video/v0.ts"),
          cache: "\(directory)/cache")
        #expect(report.items.map(\.state) == ["done"], "\(report.items)")
        for file in ["audio/en.m3u8", "audio/en0.aac", "video/index.m3u8"] {
          #expect(!origin.requests(for: file).isEmpty, "\(file): \(origin.allRequests())")
        }
        for file in ["audio/fr.m3u8", "audio/fr0.aac", "audio/unused.m3u8"] {
          #expect(origin.requests(for: file).isEmpty, "\(file)")
        }
      }
    }
  }

  /// `GET /preload` every 50 ms until `isDone` holds of the report (at most 10 s); the last report.
  func waitForPreload(_ port: Int, until isDone: (Report) -> Bool) async throws -> Report {
    var report = Report(items: [])
    for _ in 0..<200 {
      let get = try await blocking { try preload(port, "GET") }
      #expect(get.status == 200)
      report = try JSONDecoder().decode(Report.self, from: Data(get.body))
      if isDone(report) { break }
      try await Task.sleep(for: .milliseconds(50))
    }
    return report
  }

  /// The value of an unlabelled sample in `/metrics` (a gauge's is written as a floating-point number).
  func metric(_ port: Int, _ name: String) async throws -> Int64? {
    let text = String(
      decoding: try await blocking { try rawRequest(port: port, "/metrics") }.body, as: UTF8.self)
    let line = text.split(separator: "\n").first { $0.hasPrefix("\(name) ") }
    return line.flatMap { Double($0.split(separator: " ")[1]) }.map { Int64($0) }
  }

  /// The preloaded bytes are settled: those a player is then served count as served, the rest as evicted when
  /// the compactor cuts the item's tail (`--keep-heads`).
  @Test func preloadedBytesAreCountedAsServedOrEvictedUnplayed() async throws {
    try await withTemporaryDirectory { directory in
      try await withFileOrigin { origin in
        let head = 32768
        let (proxy, port) = try await startProxy(
          cache: "\(directory)/cache",
          ["--chunk-size", "16384", "--max-size", "200000", "--keep-heads", "\(head)"])
        defer { proxy.kill() }
        let next = origin.url(file: "tail-index.mp4")
        let body =
          "{\"items\":[\"\(origin.url(file: "faststart.mp4"))\",\"\(next)\"],\"current\":0,\"seconds\":[2]}"
        #expect(try await blocking { try preload(port, "PUT", body) }.status == 204)
        let report = try await waitForPreload(port) { $0.items.first?.state == "done" }
        let fetched = try #require(report.items.first?.fetchedBytes)
        #expect(fetched > Int64(head) && report.items.first?.state == "done", "\(report.items)")
        #expect(try await metric(port, "mediacache_preload_unplayed_bytes") == fetched)
        #expect(try await metric(port, "mediacache_preload_served_bytes_total") == 0)

        // A player reads the item's first 32 KiB: preloaded, so counted as served.
        let path = "/http/127.0.0.1:\(origin.port)/files/tail-index.mp4"
        let range = try await blocking {
          try rawRequest(port: port, path, headers: [("Range", "bytes=0-\(head - 1)")])
        }
        #expect(range.status == 206 && range.body.count == head)
        #expect(try await metric(port, "mediacache_preload_served_bytes_total") == Int64(head))
        #expect(try await metric(port, "mediacache_preload_unplayed_bytes") == fetched - Int64(head))

        // Once the item is idle, another video passes --max-size: the item's tail past 32 KiB is cut first,
        // and the preloaded bytes there were never played.
        try await Task.sleep(for: .seconds(3))
        let other = try await blocking {
          try rawRequest(port: port, "/http/127.0.0.1:\(origin.port)/files/faststart.mp4")
        }
        #expect(other.status == 200 && other.body.count == 157_719)
        var evicted: Int64?
        for _ in 0..<100 {
          evicted = try await metric(port, "mediacache_preload_evicted_unplayed_bytes_total")
          if evicted == fetched - Int64(head) { break }
          try await Task.sleep(for: .milliseconds(100))
        }
        #expect(evicted == fetched - Int64(head))
        #expect(try await metric(port, "mediacache_preload_unplayed_bytes") == 0)
      }
    }
  }

  /// Another process evicts a preloaded item (`cache-compactor`, which sends this proxy no event): the proxy's
  /// periodic check against the disk counts its preloaded bytes as evicted unplayed.
  @Test func anotherProcesssEvictionCountsAsEvictedUnplayed() async throws {
    try await withTemporaryDirectory { directory in
      try await withFileOrigin { origin in
        let cache = "\(directory)/cache"
        let (proxy, port) = try await startProxy(
          cache: cache, ["--chunk-size", "16384", "--preload-check-interval", "0.5"])
        defer { proxy.kill() }
        let body =
          "{\"items\":[\"\(origin.url(file: "faststart.mp4"))\",\"\(origin.url(file: "tail-index.mp4"))\"],"
          + "\"current\":0,\"seconds\":[2]}"
        #expect(try await blocking { try preload(port, "PUT", body) }.status == 204)
        let report = try await waitForPreload(port) { $0.items.first?.state == "done" }
        let fetched = try #require(report.items.first?.fetchedBytes)
        #expect(fetched > 0 && report.items.first?.state == "done", "\(report.items)")
        // The preload's last writes are committed once its object closes (a second after its last read).
        try await Task.sleep(for: .seconds(2))
        #expect(try await metric(port, "mediacache_preload_evicted_unplayed_bytes_total") == 0)
        let pass = try await run(
          binary("cache-compactor"), [cache, "--max-size", "1", "--keep-heads", "off", "--json"])
        #expect(pass.status == 0, "\(pass.stderr)")
        #expect(pass.text.contains("\"evictedCount\":1"), "\(pass.text)")
        var evicted: Int64?
        for _ in 0..<100 {
          evicted = try await metric(port, "mediacache_preload_evicted_unplayed_bytes_total")
          if evicted == fetched { break }
          try await Task.sleep(for: .milliseconds(100))
        }
        #expect(evicted == fetched)
        #expect(try await metric(port, "mediacache_preload_unplayed_bytes") == 0)
      }
    }
  }

  @Test func badBodiesAreRefusedWithTheReason() async throws {
    try await withTemporaryDirectory { directory in
      let (proxy, port) = try await startProxy(cache: "\(directory)/cache", [])
      defer { proxy.kill() }
      let cases: [(String, String, Int, String)] = [
        ("PUT", "{\"items\": [1], \"current\": 0}", 400, "the body is not {\"items\""),
        ("PUT", "{\"items\": [\"ftp://h/x\"], \"current\": 0}", 403, "items[0]: only http and https"),
        ("PUT", "{\"items\": [\"http://h/x\"], \"current\": 3}", 400, "current is 3"),
        ("PUT", "{\"items\": [], \"current\": -1, \"seconds\": [1e9]}", 400, "seconds must be"),
        ("PUT", String(repeating: " ", count: 70_000), 413, "larger than 65536 bytes"),
        ("POST", "{}", 405, "/preload takes GET, HEAD and PUT"),
      ]
      for (method, body, status, reason) in cases {
        let response = try await blocking { try preload(port, method, body) }
        let text = String(decoding: response.body, as: UTF8.self)
        #expect(
          response.status == status && text.contains(reason),
          "\(method) \(body.prefix(60)): \(response.status) \(text)")
      }
      // Nothing was taken: the window is empty.
      let get = try await blocking { try preload(port, "GET") }
      #expect(String(decoding: get.body, as: UTF8.self) == "{\"items\":[]}")
    }
  }
}
