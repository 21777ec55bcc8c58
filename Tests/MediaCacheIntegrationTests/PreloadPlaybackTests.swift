import Foundation
import MediaCacheStreaming
import MediaCacheTestSupport
import Testing

/// `mediacache preload --seconds N` caches what a player needs to play the first N seconds: with the origin
/// stopped, ffmpeg plays them through the proxy from the cache, frame for frame as from the local file, and no
/// byte comes from the origin. With N - 1 seconds preloaded, the same playback fails: the test can fail.
/// The cases run one at a time: each runs ffmpeg three times and two proxies, and eight at once beside the other
/// suites made the timing bounds of other tests fail on the 2-core CI machine.
@Suite(.serialized) struct PreloadPlaybackTests {
  @Test(arguments: [
    "tail-index.mp4", "faststart.mp4", "hls/master.m3u8", "hls/v0/index.m3u8", "hls/v1/index.m3u8",
    "hls/v2/index.m3u8", "fragmented.mp4", "dash/stream.mpd",
  ])
  func thePreloadedSecondsPlayWithTheOriginStopped(file: String) async throws {
    try await withTemporaryDirectory { directory in
      let seconds = 2.0
      let full = "\(directory)/preloaded"
      let short = "\(directory)/preloaded-short"
      // Made from faststart.mp4: a fragmented MP4 (moof/mdat at each 1 s key frame), and a DASH stream with one
      // representation per adaptation set (ffmpeg's DASH demuxer opens every representation, so the fixture's
      // two video representations would need both preloaded; players start on one).
      let generated = ["fragmented.mp4", "dash/stream.mpd"].contains(file)
      let root = generated ? "\(directory)/media" : mediaFixturesDirectory
      if generated {
        try FileManager.default.createDirectory(atPath: "\(root)/dash", withIntermediateDirectories: true)
        let input = ["-v", "error", "-i", "\(mediaFixturesDirectory)/faststart.mp4", "-c", "copy"]
        let output =
          file == "fragmented.mp4"
          ? ["-movflags", "frag_keyframe+empty_moov", "\(root)/\(file)"]
          : ["-f", "dash", "-seg_duration", "1", "-use_timeline", "0", "\(root)/\(file)"]
        _ = try await runMediaTool("ffmpeg", input + output)
      }
      let url = try await withFileOrigin(root: root) { origin in
        let url = origin.url(file: file)
        for (cache, preloaded) in [(full, seconds), (short, seconds - 1)] {
          // Chunks of 16 KiB, so that a preload of N - 1 seconds does not hold N by rounding up to chunks.
          let result = try await run(
            binary("mediacache"),
            ["preload", "--cache", cache, "--chunk-size", "16384", "--seconds", String(preloaded), url])
          #expect(result.status == 0, "\(result.stderr)")
          let how =
            switch file {
            case "fragmented.mp4": "ranges from its fragments"
            case "dash/stream.mpd": "files (the MPD, initialization and media segments)"
            default: file.hasSuffix(".mp4") ? "ranges from its sample tables" : "files (playlists"
            }
          #expect(result.text.contains(how), "\(result.text)")
        }
        return url
      }
      // The origin is stopped: the proxy has only what was preloaded.
      // A master playlist's first variant is the one preloaded (where players start; ffmpeg, which opens every
      // variant, plays the one with the most pixels that it could open: that one, with the others missing).
      let reference = file == "hls/master.m3u8" ? "hls/v0/index.m3u8" : file
      let local = try await frameHashes("\(root)/\(reference)", duration: seconds)
      // 2 s of video at 25 fps (48 or 49 frames from fragments and segments, which start at a later time).
      #expect((48...50).contains(local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count))
      try await expectPlaybackFromCacheOnly(
        url, enough: full, short: short, local: local, seconds: seconds, what: "\(file) preloaded")
    }
  }
}

/// Plays the first `seconds` of `url` with ffmpeg through a proxy on each cache, the origin stopped: from
/// `enough`, the frames of `local` (the same seconds played from the file); from `short`, not those (it lacks
/// some); and no byte from an origin either time.
func expectPlaybackFromCacheOnly(
  _ url: String, enough: String, short: String, local: String, seconds: Double, what: String
) async throws {
  for (cache, isEnough) in [(enough, true), (short, false)] {
    let (proxy, port) = try await startProxy(cache: cache, [])
    defer { proxy.kill() }
    let proxied = "http://127.0.0.1:\(port)\(try #require(ProxyPathForm.path(for: url)))"
    let played = try? await frameHashes(proxied, duration: seconds)
    if isEnough {
      #expect(played == local, "\(what): \(cache) did not play \(seconds) s the same")
    } else {
      #expect(played != local, "\(what): \(cache) played \(seconds) s, though short")
    }
    let metrics = String(
      decoding: try await blocking { try rawRequest(port: port, "/metrics") }.body, as: UTF8.self)
    #expect(metrics.contains("mediacache_proxy_served_bytes_total{source=\"origin\"} 0\n"), "\(metrics)")
  }
}
