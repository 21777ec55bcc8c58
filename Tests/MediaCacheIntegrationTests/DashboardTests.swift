import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// `GET /` and `GET /dashboard.json`: the operator's page, loaded in headless Chromium over a copy of the
/// `clean` fixture cache: it shows every object with a bar of its cached ranges (the partial object's gap
/// drawn as two runs), and the browser logs no console message. The JSON is paged and bounded.
@Suite(.serialized) struct DashboardTests {
  static let grouped = "f5455489a4efec86ed7d2372f22709009af0e97242ad096325e9d00870bf93d5"

  /// A copy of the `clean` fixture (the proxy may write to it), one of its objects in group `file-7`, with a
  /// proxy on it.
  func withFixtureProxy(_ body: (Int) async throws -> Void) async throws {
    try await withTemporaryDirectory { directory in
      try FileManager.default.copyItem(
        atPath: "\(cacheFixturesDirectory)/clean", toPath: "\(directory)/cache")
      let manager = try FileHandleAssetDataManager(
        store: try ShardedStore(root: "\(directory)/cache"), id: try #require(ObjectID(hex: Self.grouped)))
      try manager.setGroup("file-7")
      try manager.close()
      let (proxy, port) = try await startProxy(cache: "\(directory)/cache", [])
      defer { proxy.kill() }
      try await body(port)
    }
  }

  /// Headless Chromium's DOM of `url` after its scripts ran for `seconds` of virtual time, and its console.
  func chromium(_ url: String, seconds: Int = 5) async throws -> (dom: String, console: [Substring]) {
    let result = try await run(
      "/usr/bin/chromium",
      [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
        "--virtual-time-budget=\(seconds * 1000)", "--dump-dom", url,
      ])
    #expect(result.status == 0, "\(result.stderr)")
    return (result.text, result.stderr.split(separator: "\n").filter { $0.contains(":CONSOLE") })
  }

  @Test func thePageShowsTheObjectsAndTheirGapsWithoutAConsoleMessage() async throws {
    try await withFixtureProxy { port in
      let (dom, console) = try await chromium("http://127.0.0.1:\(port)/")
      #expect(console.isEmpty, "\(console)")
      // The four objects of the fixture, each a row; the partial one (chunks 0 and 2 of 3) has two runs.
      for id in [
        "f5455489a4efec86ed7d2372f22709009af0e97242ad096325e9d00870bf93d5",
        "e12eeea1dc3aa9c6cd0592b93aaf7bc3beb50b58885af3c81c856e2e83cdb2aa",
        "120a142ad9224ee464278a8c1af040ea49132fa845775e6b597dee93c18b4336",
        "0cf9cebdfe4ca243aeeb4685abd76ceeddd59aa0450f27b351e97ca2d1e5ff0d",
      ] {
        #expect(dom.contains("data-object=\"\(id)\""), "\(id)")
      }
      #expect(dom.contains("data-ranges=\"2\""))
      #expect(dom.contains("<td>file-7</td>"), "the group column")
      #expect(dom.contains("1-4 of 4") && dom.contains("data-updated="))
      // (Not asserted: the status line of the last poll. When the virtual time runs out while a poll waits for
      // its answer, Chromium fails that fetch, and the page says it cannot reach the proxy.)
    }
    // The check can fail: a page that writes to the console is seen.
    let (_, console) = try await chromium(
      "data:text/html,<script>console.error('dashboard-check')</script>", seconds: 1)
    #expect(console.contains { $0.contains("dashboard-check") })
  }

  /// The JSON's `fetches` at one moment.
  func fetches(_ port: Int) async throws -> [[String: Any]] {
    let page = try await blocking { try rawRequest(port: port, "/dashboard.json?limit=1") }
    let json = try #require(try JSONSerialization.jsonObject(with: Data(page.body)) as? [String: Any])
    return try #require(json["fetches"] as? [[String: Any]])
  }

  @Test func liveOriginFetchesAreListedWhileTheyRun() async throws {
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    try await withFixtureProxy { port in
      #expect(try await fetches(port).isEmpty)
      // About 7 s of trickle: 16 KiB pieces 60 ms apart. The listing is looked for while the origin is still
      // sending: beside the other suites this test's task can wait seconds for a thread of the pool between two
      // steps (CI, 2026-12-01: 100 polls after the origin had the request, none listed, with a trickle of 2.5 s).
      let url = origin.url(.slow, "live", size: 2_000_000, query: "delay-ms=60")
      let player = Task { try await blocking { try rawRequest(port: port, ProxyServer.proxyPath(for: url)) } }
      let id = CacheKey(url).objectID.hex
      for _ in 0..<800 where origin.requests(for: "live").isEmpty {
        try await Task.sleep(for: .milliseconds(25))
      }
      #expect(!origin.requests(for: "live").isEmpty, "the player's request never reached the origin")
      var listed: [String: Any]?
      var pollsWhileSending = 0
      for _ in 0..<400 where listed == nil {
        // (Bytes still to come from the origin: the fetch is running, whatever windows it asks in.)
        let sending = origin.totalBodyBytes(for: "live") < 2_000_000
        listed = try await fetches(port).first { $0["id"] as? String == id }
        guard sending else { break }
        pollsWhileSending += 1
        if listed == nil { try await Task.sleep(for: .milliseconds(50)) }
      }
      #expect(
        (listed?["flights"] as? Int ?? 0) >= 1,
        "the fetch was never listed (\(pollsWhileSending) polls while the origin sent)")
      let response = try await player.value
      #expect(response.status == 200 && response.body.count == 2_000_000)
      var gone = false
      for _ in 0..<100 where !gone {
        gone = try await fetches(port).isEmpty
        if !gone { try await Task.sleep(for: .milliseconds(50)) }
      }
      #expect(gone, "the fetch was still listed after it ended")
    }
  }

  @Test func theJSONIsPagedAndBounded() async throws {
    try await withFixtureProxy { port in
      let page = try await blocking { try rawRequest(port: port, "/dashboard.json?offset=1&limit=2") }
      #expect(page.status == 200)
      let json = try #require(try JSONSerialization.jsonObject(with: Data(page.body)) as? [String: Any])
      let objects = try #require(json["objects"] as? [String: Any])
      #expect(
        objects["total"] as? Int == 4 && objects["offset"] as? Int == 1 && objects["limit"] as? Int == 2)
      #expect((objects["items"] as? [Any])?.count == 2)
      let totals = try #require(json["totals"] as? [String: Any])
      #expect(totals["objects"] as? Int == 4)
      for (query, reason) in [
        ("limit=0", "limit must be"), ("limit=201", "limit must be"), ("offset=-1", "offset must be"),
        ("offset=99999999999999999999", "offset must be"), ("limit=ten", "limit must be"),
      ] {
        let refused = try await blocking { try rawRequest(port: port, "/dashboard.json?\(query)") }
        let text = String(decoding: refused.body, as: UTF8.self)
        #expect(refused.status == 400 && text.contains(reason), "\(query): \(refused.status) \(text)")
      }
      let page2 = try await blocking { try rawRequest(port: port, "/dashboard.json?offset=10") }
      #expect(page2.status == 200 && String(decoding: page2.body, as: UTF8.self).contains("\"items\":[]"))
      let html = try await blocking { try rawRequest(port: port, "/") }
      let text = String(decoding: html.body, as: UTF8.self)
      #expect(html.status == 200 && text.hasPrefix("<!doctype html>"))
      // Self-contained: nothing loaded from elsewhere.
      #expect(!text.contains("src=") && !text.contains("href=") && !text.contains("@import"))
    }
  }
}
