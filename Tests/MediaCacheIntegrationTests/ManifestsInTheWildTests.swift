import Foundation
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// Playlists and MPDs as origins serve them in the wild, through the real binary.
///
/// A playlist or MPD behind a redirect (a CDN's or a "play URL" API's 302 to an edge or a signed path): its
/// relative references resolve against the URL the redirect led to, as a player that followed the redirect
/// itself resolves them, through the proxy in both its request forms, from the cache as on the miss, and in
/// `mediacache fetch --hls` and `--dash`. Before, they resolved against the URL asked, so every segment was a
/// 404 and the stream did not play.
@Suite struct ManifestsInTheWildTests {
  let mediacache = binary("mediacache")

  /// The test origin's URL that redirects (one 302) to its file `relativePath`; named `name`, so the URL
  /// asked ends as the file's does (`.m3u8`, `.mpd`).
  static func redirecting(_ origin: TestOrigin, to relativePath: String, as name: String) -> String {
    origin.url(.redirect, name, size: 0, query: "to=/files/\(relativePath)")
  }

  @Test func ffmpegPlaysAPlaylistBehindARedirectInBothFormsLikeTheLocalFile() async throws {
    try await withProxy(fileRoot: mediaFixturesDirectory) { fixture in
      let local = try await frameHashes("\(mediaFixturesDirectory)/hls/v0/index.m3u8")
      let asked = Self.redirecting(fixture.origin, to: "hls/v0/index.m3u8", as: "index.m3u8")
      var segmentRequests = 0
      for round in 0..<2 {  // a miss, then from the cache
        if round == 1 { segmentRequests = fixture.origin.requests(for: "hls/v0/seg000.ts").count }
        for path in [fixture.path(asked), ProxyServer.queryFormPath(for: asked)] {
          let played = try await frameHashes("\(fixture.endpoint)\(path)")
          #expect(played == local, "round \(round), \(path)")
          // Every line names a proxied URL of the file the redirect led to, or stays relative to it.
          let text = String(decoding: try await fixture.request(path).body, as: UTF8.self)
          for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            #expect(line.hasPrefix("/http/127.0.0.1:\(fixture.origin.port)/files/hls/v0/seg"), "\(line)")
          }
        }
      }
      #expect(segmentRequests > 0)
      #expect(
        fixture.origin.requests(for: "hls/v0/seg000.ts").count == segmentRequests, "played from the cache")
      #expect(fixture.origin.allRequests().allSatisfy { $0.status != 404 }, "\(fixture.origin.allRequests())")
    }
  }

  /// A redirected playlist revalidated once stale (`max-age=1`, a 304) still resolves against where the
  /// redirect led: the revalidation's own redirect is recorded again, not dropped.
  @Test func aRevalidatedPlaylistBehindARedirectStillResolvesWhereItLed() async throws {
    try await withProxy(fileRoot: mediaFixturesDirectory) { fixture in
      fixture.origin.setHeaders(name: "hls/v0/index.m3u8", [("Cache-Control", "max-age=1")])
      let asked = Self.redirecting(fixture.origin, to: "hls/v0/index.m3u8", as: "index.m3u8")
      let path = ProxyServer.queryFormPath(for: asked)
      for round in 0..<2 {
        if round == 1 { try await Task.sleep(for: .seconds(1.5)) }
        let response = try await fixture.request(path)
        #expect(response.status == 200, "round \(round)")
        let text = String(decoding: response.body, as: UTF8.self)
        let segments = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(!segments.isEmpty, "round \(round)")
        for line in segments {
          #expect(
            line.hasPrefix("/http/127.0.0.1:\(fixture.origin.port)/files/hls/v0/seg"),
            "round \(round): \(line)")
        }
      }
      let revalidations = fixture.origin.requests(for: "hls/v0/index.m3u8").filter { $0.status == 304 }
      #expect(!revalidations.isEmpty, "\(fixture.origin.requests(for: "hls/v0/index.m3u8"))")
    }
  }

  @Test func ffmpegPlaysAnMPDBehindARedirectInBothFormsLikeTheLocalFile() async throws {
    let streams = try await ProxyDASHTests.makeStreams()
    defer { streams.cleanup() }
    try await withProxy(fileRoot: streams.path) { fixture in
      let local = try await frameHashes(streams.file("dash/stream.mpd"))
      let asked = Self.redirecting(fixture.origin, to: "dash/stream.mpd", as: "stream.mpd")
      for round in 0..<2 {
        for path in [fixture.path(asked), ProxyServer.queryFormPath(for: asked)] {
          #expect(try await frameHashes("\(fixture.endpoint)\(path)") == local, "round \(round), \(path)")
        }
      }
    }
  }

  @Test func fetchFollowsAPlaylistAndAnMPDBehindARedirect() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    try await withFileOrigin { origin in
      let master = Self.redirecting(origin, to: "hls/master.m3u8", as: "master.m3u8")
      let fetched = try await run(mediacache, ["fetch", "--hls", "--cache", dir.file("cache"), master])
      #expect(fetched.status == 0, "\(fetched.stderr)")
      for file in FetchHLSCommandTests.variantFiles[0] {
        let requests = origin.requests(for: file)
        #expect(!requests.isEmpty && requests.allSatisfy { $0.status / 100 == 2 }, "\(file): \(requests)")
      }
    }
    let streams = try await ProxyDASHTests.makeStreams()
    defer { streams.cleanup() }
    try await withFileOrigin(root: streams.path) { origin in
      let mpd = Self.redirecting(origin, to: "dash/stream.mpd", as: "stream.mpd")
      let fetched = try await run(mediacache, ["fetch", "--dash", "--cache", dir.file("dash-cache"), mpd])
      #expect(fetched.status == 0, "\(fetched.stderr)")
      let segments = origin.allRequests().filter {
        $0.name.hasPrefix("dash/") && $0.name != "dash/stream.mpd"
      }
      #expect(!segments.isEmpty && segments.allSatisfy { $0.status / 100 == 2 }, "\(segments)")
    }
  }

  /// A plain M3U (a list of URLs without `#EXTM3U`, as a radio's `listen.m3u`) served with an HLS type is
  /// served as it is, in both forms: a player reads it as a list of URLs (before: a 502, "not an HLS
  /// playlist").
  @Test func aPlainM3UWithAnHLSTypeIsServedAsItIs() async throws {
    let root = try TemporaryDirectory()
    defer { root.cleanup() }
    let text = "http://radio.example/stream.mp3\r\nrelative.mp3\r\n"
    try Data(text.utf8).write(to: URL(fileURLWithPath: root.file("listen.m3u")))
    try await withProxy(fileRoot: root.path) { fixture in
      let url = fixture.origin.url(file: "listen.m3u")
      for path in [fixture.path(url), ProxyServer.queryFormPath(for: url)] {
        let response = try await fixture.request(path)
        #expect(response.status == 200, "\(path): \(String(decoding: response.body, as: UTF8.self))")
        #expect(String(decoding: response.body, as: UTF8.self) == text, "\(path)")
        #expect(response.header("Content-Type") == "audio/x-mpegurl", "\(path)")
      }
    }
  }
}
