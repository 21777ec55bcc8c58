import Foundation
import MediaCache
import MediaCacheStreaming
import MediaCacheTestSupport
import Testing

@testable import cache_compactor

/// `--keep-heads 2s` (seconds of media, the default window's kind): a size-limited pass cuts a whole cached video
/// down to what a player reads to start it, wherever that lies (an MP4 whose `moov` is at its end keeps that
/// too), and the first two seconds still play with the origin stopped, frame for frame as from the local file.
/// Cut to one second, the same playback fails: the test can fail.
@Suite(.serialized) struct HeadKeepingPlaybackTests {
  @Test(arguments: ["tail-index.mp4", "faststart.mp4", "fragmented.mp4"])
  func theKeptSecondsPlayWithTheOriginStopped(file: String) async throws {
    try await withTemporaryDirectory { directory in
      let seconds = 2.0
      let root = file == "fragmented.mp4" ? "\(directory)/media" : mediaFixturesDirectory
      if file == "fragmented.mp4" {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        _ = try await runMediaTool(
          "ffmpeg",
          [
            "-v", "error", "-i", "\(mediaFixturesDirectory)/faststart.mp4", "-c", "copy", "-movflags",
            "frag_keyframe+empty_moov", "\(root)/\(file)",
          ])
      }
      let length = try #require(
        try FileManager.default.attributesOfItem(atPath: "\(root)/\(file)")[.size] as? Int)
      let caches = ["\(directory)/kept-2s", "\(directory)/kept-1s"]
      let url = try await withFileOrigin(root: root) { origin in
        let url = origin.url(file: file)
        for cache in caches {
          let fetched = try await run(
            binary("mediacache"), ["fetch", "--cache", cache, "--chunk-size", "16384", url])
          #expect(fetched.status == 0, "\(fetched.stderr)")
        }
        return url
      }
      var keptChunks: [Int] = []
      for (cache, window) in zip(caches, ["2s", "1s"]) {
        // One object, a limit just under it: the cut alone meets it, nothing goes whole.
        let store = try ShardedStore(root: cache, chunkSize: 16384, durability: .relaxed)
        let id = try #require(try store.allObjectIDs().first)
        let before = try store.diskUsage(id)
        let pass = try await run(
          binary("cache-compactor"), [cache, "--max-size", "\(before - 1)", "--keep-heads", window, "--json"])
        #expect(pass.status == 0, "\(pass.stderr)")
        let line = try #require(pass.text.split(separator: "\n").first)
        let report = try decodeReport(PassReport.self, Data(line.utf8)).report
        #expect(report.removed.isEmpty)
        let cut = try #require(report.trimmed.first { $0.id == id }, "\(pass.text)")
        #expect(cut.bytes > 0 && cut.keptRanges.first?.lowerBound == 0)
        let manifest = try #require(try store.readManifest(id))
        // The fixture is 4 s long: two seconds keep about half of it (in whole chunks), one second less.
        #expect(manifest.presentChunks.count * 16384 < length * 3 / 4, "\(file): \(manifest.presentChunks)")
        keptChunks.append(manifest.presentChunks.count)
        if file == "tail-index.mp4" {
          // The head and the moov at the end, nothing between.
          #expect(cut.keptRanges.count == 2 && cut.keptRanges.last?.upperBound == Int64(length))
        }
        let fsck = try await run(binary("cache-fsck"), [cache])
        #expect(fsck.status == 0, "\(fsck.text) \(fsck.stderr)")
      }
      #expect(keptChunks[1] < keptChunks[0], "\(file): \(keptChunks)")
      // The origin is stopped: the proxy has only what the cuts kept.
      let local = try await frameHashes("\(root)/\(file)", duration: seconds)
      #expect((48...50).contains(local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count))
      try await expectPlaybackFromCacheOnly(
        url, enough: caches[0], short: caches[1], local: local, seconds: seconds, what: "\(file) cut")
    }
  }
}
