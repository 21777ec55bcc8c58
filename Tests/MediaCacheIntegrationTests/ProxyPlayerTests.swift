import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestOrigin
import Testing

/// A real player (ffmpeg, ffprobe) reads the media fixtures through the proxy from a loopback origin: the
/// decoded frames equal those of the local files, cold (filling the cache) and warm (from the cache alone).
@Suite struct ProxyPlayerTests {
  static let decodable = [
    "tail-index.mp4", "faststart.mp4", "hls/master.m3u8", "hls/v0/index.m3u8", "hls/v1/index.m3u8",
    "hls/v2/index.m3u8",
  ]

  @Test(arguments: decodable)
  func ffmpegDecodesTheSameFramesThroughTheProxyColdAndWarm(file: String) async throws {
    try await withProxy(fileRoot: mediaFixturesDirectory) { fixture in
      let local = try await frameHashes("\(mediaFixturesDirectory)/\(file)")
      let proxied = "\(fixture.endpoint)\(fixture.path(fixture.origin.url(file: file)))"
      let cold = try await frameHashes(proxied)
      #expect(cold == local, "cold")
      #expect(!fixture.origin.allRequests().isEmpty)
      fixture.origin.resetRecords()
      let warm = try await frameHashes(proxied)
      #expect(warm == local, "warm")
      if file.hasSuffix(".m3u8") {
        // Every playlist, key and segment came from the cache the second time.
        #expect(fixture.origin.allRequests().isEmpty, "\(fixture.origin.allRequests())")
      }
      let videoFrames = local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count
      #expect(videoFrames == 100)
    }
  }

  // Not the master playlist or the fMP4 variant: ffmpeg 5.1 cannot seek in fMP4 HLS, even in local files
  // (see MediaFixtureTests.ffmpegSeeksTheSameOverHTTP).
  @Test(arguments: ["tail-index.mp4", "faststart.mp4", "hls/v0/index.m3u8", "hls/v1/index.m3u8"])
  func ffmpegSeeksTheSameThroughTheProxy(file: String) async throws {
    try await withProxy(fileRoot: mediaFixturesDirectory) { fixture in
      let local = try await frameHashes("\(mediaFixturesDirectory)/\(file)", seek: 2)
      let proxied = "\(fixture.endpoint)\(fixture.path(fixture.origin.url(file: file)))"
      let cold = try await frameHashes(proxied, seek: 2)
      let warm = try await frameHashes(proxied, seek: 2)
      #expect(cold == local)
      #expect(warm == local)
      let videoFrames = local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count
      #expect((45...55).contains(videoFrames))
    }
  }

  @Test(arguments: ["tail-index.mp4", "faststart.mp4", "hls/master.m3u8"])
  func ffprobeReadsThroughTheProxy(file: String) async throws {
    try await withProxy(fileRoot: mediaFixturesDirectory) { fixture in
      let local = try await probedDuration("\(mediaFixturesDirectory)/\(file)")
      let proxied = "\(fixture.endpoint)\(fixture.path(fixture.origin.url(file: file)))"
      let remote = try await probedDuration(proxied)
      #expect(remote == local)
      if file == "tail-index.mp4" {
        // The player asked the proxy for the index at the tail; the proxy fetched only chunks it needed.
        let size = try mediaFixture(file).count
        #expect(fixture.origin.totalBodyBytes(for: file) <= 2 * size)
      }
    }
  }

  /// A playlist read in path form keeps its relative URIs byte for byte (they resolve to proxied URLs as they
  /// are); read in query form, every URI is rewritten to the path form of its target.
  @Test func playlistsAreRewrittenToProxiedURLs() async throws {
    try await withProxy(fileRoot: mediaFixturesDirectory) { fixture in
      let base = fixture.origin.url(file: "hls/")
      for (playlist, expectedTargets) in [
        ("hls/master.m3u8", ["v0/index.m3u8", "v1/index.m3u8", "v2/index.m3u8"]),
        ("hls/v1/index.m3u8", ["v1/key.bin", "v1/seg000.ts"]),
        ("hls/v2/index.m3u8", ["v2/init.mp4"]),
      ] {
        let originURL = fixture.origin.url(file: playlist)
        let original = String(decoding: try mediaFixture(playlist), as: UTF8.self)
        let pathForm = try await fixture.request(fixture.path(originURL))
        #expect(fixture.path(originURL).hasPrefix("/http/127.0.0.1:"))
        #expect(pathForm.status == 200)
        #expect(String(decoding: pathForm.body, as: UTF8.self) == original)

        let response = try await fixture.request(ProxyServer.queryFormPath(for: originURL))
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/vnd.apple.mpegurl")
        let text = String(decoding: response.body, as: UTF8.self)
        #expect(text.hasPrefix("#EXTM3U"))
        #expect(Int(response.header("Content-Length") ?? "") == response.body.count)
        for target in expectedTargets {
          let proxied = ProxyServer.proxyPath(for: base + target)
          #expect(proxied.hasPrefix("/http/127.0.0.1:"))
          #expect(text.contains(proxied), "\(playlist) lacks \(proxied):\n\(text)")
        }
        // No URI is left pointing anywhere but the proxy.
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
          #expect(line.hasPrefix("/http/127.0.0.1:\(fixture.origin.port)/files/hls/"), "\(line)")
        }
        for line in text.split(separator: "\n") where line.contains("URI=\"") {
          #expect(line.contains("URI=\"/http/"), "\(line)")
        }
        // A Range of the rewritten playlist is a range of the rewritten text.
        let ranged = try await fixture.request(
          ProxyServer.queryFormPath(for: originURL), headers: [("Range", "bytes=0-6")])
        #expect(ranged.status == 206)
        #expect(ranged.body == Array("#EXTM3U".utf8))
      }
    }
  }
}
