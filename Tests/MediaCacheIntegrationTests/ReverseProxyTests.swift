import Foundation
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// The reverse-proxy mode through the real binary (`mediacache proxy --upstream`): a path is served from the
/// upstream's URL with the path and query kept, the proxy's own endpoints move under `/.mediacache/` and shadow
/// nothing, the path form and `?url=` are not interpreted, prefixes map longest first, and what no upstream
/// serves or could escape its path is refused.
@Suite(.serialized) struct ReverseProxyTests {
  /// A file origin over a fresh directory holding `files` (relative path: contents).
  func withFiles<T>(_ files: [String: String], _ body: (TestOrigin, String) async throws -> T) async throws
    -> T
  {
    try await withTemporaryDirectory { directory in
      let root = "\(directory)/root"
      for (path, text) in files {
        let file = "\(root)/\(path)"
        try FileManager.default.createDirectory(
          atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
      }
      return try await withFileOrigin(root: root) { origin in try await body(origin, directory) }
    }
  }

  func get(_ proxy: ProxyProcess, _ path: String, headers: [(String, String)] = []) async throws
    -> RawHTTPResponse
  {
    try await blocking { try proxy.request(path, headers: headers) }
  }

  @Test func pathsAndQueriesAreTheUpstreamsAndRangesAreCached() async throws {
    try await withTemporaryDirectory { directory in
      let origin = try await TestOrigin.start()
      defer { Task { try? await origin.shutdown() } }
      let proxy = try await ProxyProcess(cache: "\(directory)/cache", ["--upstream", origin.baseURL])
      let size = 300_000
      let expected = TestOrigin.bytes(name: "movie", size: size)
      // The same request target a client of the origin would send.
      let path = TestOrigin.path(.normal, "movie", size: size)
      let whole = try await get(proxy, path)
      #expect(whole.status == 200)
      #expect(sameBytes(whole.body, expected).equal)
      #expect(whole.header("Cache-Status") == "MediaCache; fwd=miss; stored")
      let fetched = origin.requests(for: "movie").count
      let range = try await get(proxy, path, headers: [("Range", "bytes=1000-1999")])
      #expect(range.status == 206)
      #expect(range.header("Content-Range") == "bytes 1000-1999/\(size)")
      #expect(sameBytes(range.body, Array(expected[1000..<2000])).equal)
      #expect(range.header("Cache-Status") == "MediaCache; hit")
      #expect(origin.requests(for: "movie").count == fetched, "the range came from the cache")
      // The query is part of the upstream URL: another size is another object.
      let other = try await get(proxy, TestOrigin.path(.normal, "movie", size: 1000))
      #expect(sameBytes(other.body, TestOrigin.bytes(name: "movie", size: 1000)).equal)
      #expect(await proxy.stop().status == 0)
    }
  }

  @Test func ownEndpointsMoveUnderTheAdminPrefixAndShadowNothing() async throws {
    let files = [
      "metrics": "the upstream's own /metrics", "preload": "the upstream's /preload",
      "index.html": "the upstream's home page",
      "http/example.com/page.txt": "a path that looks like the path form",
      "page.txt": "page",
    ]
    try await withFiles(files) { origin, directory in
      let proxy = try await ProxyProcess(cache: "\(directory)/cache", ["--upstream", origin.url(file: "")])
      for (path, text) in [
        ("/metrics", files["metrics"]!), ("/preload", files["preload"]!),
        ("/index.html", files["index.html"]!),
        ("/http/example.com/page.txt", files["http/example.com/page.txt"]!),
        ("/page.txt?url=http%3A%2F%2Fexample.com%2Fother", "page"),
      ] {
        let response = try await get(proxy, path)
        #expect(response.status == 200, "\(path)")
        #expect(String(decoding: response.body, as: UTF8.self) == text, "\(path)")
      }
      let metrics = try await get(proxy, "/.mediacache/metrics")
      #expect(metrics.status == 200)
      #expect(String(decoding: metrics.body, as: UTF8.self).contains("mediacache_proxy_requests_total"))
      let dashboard = try await get(proxy, "/.mediacache/")
      #expect(dashboard.status == 200 && dashboard.header("Content-Type")?.hasPrefix("text/html") == true)
      let page = try await get(proxy, "/.mediacache/dashboard.json?limit=1")
      #expect(page.status == 200 && page.header("Content-Type")?.hasPrefix("application/json") == true)
      let bare = try await get(proxy, "/.mediacache")
      #expect(bare.status == 308 && bare.header("Location") == "/.mediacache/")
      // A preload item given as a local path is the upstream's URL.
      let body = #"{"items": ["/page.txt"], "current": -1}"#
      let put = try await blocking {
        let connection = try RawHTTPConnection(port: proxy.port)
        defer { connection.close() }
        try connection.sendRequest(
          "PUT", "/.mediacache/preload",
          headers: [("Content-Type", "application/json"), ("Content-Length", "\(body.utf8.count)")])
        try connection.send(body)
        return try connection.readResponse()
      }
      #expect(put.status == 204, "\(String(decoding: put.body, as: UTF8.self))")
      struct Window: Decodable {
        struct Item: Decodable { var url: String }
        var items: [Item]
      }
      let window = try JSONDecoder().decode(
        Window.self, from: Data(try await get(proxy, "/.mediacache/preload").body))
      #expect(window.items.map(\.url) == [origin.url(file: "page.txt")])
      let unknown = try await get(proxy, "/.mediacache/nothing")
      #expect(unknown.status == 404)
      #expect(
        origin.requests(for: ".mediacache/nothing").isEmpty, "the admin prefix never reaches the upstream")
      #expect(await proxy.stop().status == 0)
    }
  }

  @Test func prefixesMapLongestFirstAndWhatNoneServesOrCouldEscapeIsRefused() async throws {
    let files = ["x/f.txt": "under x", "y/f.txt": "under y", "x/b/f.txt": "x/b, shadowed by /a/b"]
    try await withFiles(files) { origin, directory in
      let proxy = try await ProxyProcess(
        cache: "\(directory)/cache",
        ["--upstream", "/a=\(origin.url(file: "x"))", "--upstream", "/a/b/=\(origin.url(file: "y"))/"])
      for (path, text) in [("/a/f.txt", "under x"), ("/a/b/f.txt", "under y")] {
        let response = try await get(proxy, path)
        #expect(response.status == 200, "\(path)")
        #expect(String(decoding: response.body, as: UTF8.self) == text, "\(path)")
      }
      for (path, status) in [
        ("/ab/f.txt", 404), ("/f.txt", 404), ("/", 404), ("/a/../x/f.txt", 400), ("/a/%2e%2E/y/f.txt", 400),
        ("/a/b/./f.txt", 400),
      ] {
        let response = try await get(proxy, path)
        #expect(response.status == status, "\(path): \(response.status)")
      }
      #expect(origin.requests(for: "x/f.txt").count == 1 && origin.requests(for: "y/f.txt").count == 1)
      #expect(proxy.child.outputSoFar.contains("upstream /a/b -> \(origin.url(file: "y"))"))
      #expect(await proxy.stop().status == 0)
    }
  }

  @Test func upstreamsThatCannotBeUsedAreUsageErrors() async throws {
    try await withTemporaryDirectory { directory in
      for arguments in [
        ["ftp://example.com"], ["example.com/videos"], ["http://"], ["https://example.com/v?token=1"],
        ["https://user:secret@example.com"], ["/v=not a url"], ["/.mediacache/x=http://example.com"],
        ["/v=http://a.example", "/v/=http://b.example"],
      ] {
        let result = try await run(
          binary("mediacache"),
          ["proxy", "--cache", "\(directory)/cache"] + arguments.flatMap { ["--upstream", $0] })
        #expect(result.status == 64, "\(arguments): \(result.status)")
        #expect(result.stderr.contains("--upstream"), "\(arguments): \(result.stderr)")
      }
    }
  }

  /// HLS through an upstream: relative URIs are kept, absolute ones under the upstream become local paths,
  /// others are left to the player; ffmpeg plays the whole set through the proxy alone.
  @Test func playlistsResolveThroughTheUpstreamPaths() async throws {
    try await withFileOrigin { origin in
      try await withTemporaryDirectory { directory in
        let proxy = try await ProxyProcess(
          cache: "\(directory)/cache", ["--upstream", "/media=\(origin.url(file: ""))"])
        let master = try await get(proxy, "/media/hls/master.m3u8")
        #expect(master.status == 200)
        let masterText = String(decoding: master.body, as: UTF8.self)
        #expect(masterText.contains("\nv0/index.m3u8\n"), "relative URIs kept: \(masterText)")

        // ffmpeg plays the first video stream of `path` through the proxy alone.
        let ffmpeg = try mediaTool("ffmpeg")
        func play(_ path: String) async throws {
          let played = try await run(
            ffmpeg,
            [
              "-v", "error", "-i", "http://127.0.0.1:\(proxy.port)\(path)", "-map", "0:v:0", "-f", "null",
              "-",
            ])
          #expect(played.status == 0, "\(path): \(played.stderr)")
        }
        try await play("/media/hls/master.m3u8")
        let variant = try String(
          contentsOfFile: "\(mediaFixturesDirectory)/hls/v0/index.m3u8", encoding: .utf8)
        let segments = variant.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(!segments.isEmpty)
        for segment in segments {
          #expect(
            origin.requests(for: "hls/v0/\(segment)").count >= 1, "\(segment) was read through the proxy")
        }
        // DASH too.
        try await play("/media/dash/manifest.mpd")
        #expect(origin.requests(for: "dash/chunk-stream0-00001.m4s").count >= 1)
        #expect(await proxy.stop().status == 0)
      }
    }
    // Absolute URIs: a playlist that names its segments by the upstream's URL, and one elsewhere.
    try await withFiles(["hls/seg.ts": "segment"]) { origin, directory in
      let playlist = """
        #EXTM3U
        #EXT-X-TARGETDURATION:1
        #EXTINF:1,
        \(origin.url(file: "hls/seg.ts"))
        #EXTINF:1,
        https://elsewhere.example/x.ts
        #EXTINF:1,
        ../hls/seg.ts
        #EXT-X-ENDLIST

        """
      try Data(playlist.utf8).write(to: URL(fileURLWithPath: "\(directory)/root/hls/abs.m3u8"))
      let proxy = try await ProxyProcess(
        cache: "\(directory)/cache", ["--upstream", "/m=\(origin.url(file: ""))"])
      let response = try await get(proxy, "/m/hls/abs.m3u8")
      #expect(response.status == 200)
      let lines = String(decoding: response.body, as: UTF8.self).split(separator: "\n").filter {
        !$0.hasPrefix("#")
      }
      #expect(lines == ["/m/hls/seg.ts", "https://elsewhere.example/x.ts", "/m/hls/seg.ts"], "\(lines)")
      let segment = try await get(proxy, String(lines[0]))
      #expect(String(decoding: segment.body, as: UTF8.self) == "segment")

      // An MPD: a BaseURL under the upstream and a `..` reference become local paths, a relative template is
      // kept, a BaseURL elsewhere is left absolute.
      let mpd = """
        <?xml version="1.0"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT2S" \
        profiles="urn:mpeg:dash:profile:isoff-live:2011">
          <BaseURL>\(origin.url(file: "dash/"))</BaseURL>
          <Period>
            <AdaptationSet>
              <Representation id="v" bandwidth="1000">
                <SegmentTemplate media="chunk-$Number$.m4s" initialization="../dash/init.mp4" duration="1"/>
              </Representation>
              <Representation id="w" bandwidth="2000"><BaseURL>https://elsewhere.example/w/</BaseURL></Representation>
            </AdaptationSet>
          </Period>
        </MPD>

        """
      try FileManager.default.createDirectory(
        atPath: "\(directory)/root/dash", withIntermediateDirectories: true)
      try Data(mpd.utf8).write(to: URL(fileURLWithPath: "\(directory)/root/dash/abs.mpd"))
      let manifest = try await get(proxy, "/m/dash/abs.mpd")
      #expect(manifest.status == 200)
      let text = String(decoding: manifest.body, as: UTF8.self)
      for expected in [
        "<BaseURL>/m/dash/</BaseURL>", "media=\"chunk-$Number$.m4s\"", "initialization=\"/m/dash/init.mp4\"",
        "<BaseURL>https://elsewhere.example/w/</BaseURL>",
      ] {
        #expect(text.contains(expected), "\(expected) in \(text)")
      }
      #expect(await proxy.stop().status == 0)
    }
  }
}
