import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// `mediacache fetch --hls` run as a separate process against the committed HLS fixtures
/// (`Fixtures/media/hls`) served by the test origin's `files` mode.
@Suite struct FetchHLSCommandTests {
  let mediacache = binary("mediacache")

  /// The segments of each fixture variant, and what else its media playlist needs.
  static let variantFiles: [[String]] = [
    ["hls/v0/seg000.ts", "hls/v0/seg001.ts", "hls/v0/seg002.ts", "hls/v0/seg003.ts"],
    ["hls/v1/key.bin", "hls/v1/seg000.ts", "hls/v1/seg001.ts", "hls/v1/seg002.ts", "hls/v1/seg003.ts"],
    ["hls/v2/init.mp4", "hls/v2/seg000.m4s", "hls/v2/seg001.m4s", "hls/v2/seg002.m4s", "hls/v2/seg003.m4s"],
  ]

  /// What `status --json` prints for `url`.
  func status(_ cache: String, _ url: String) async throws -> MediaCache.Status {
    try await decodeReport(
      MediaCache.Status.self, try run(mediacache, ["status", "--cache", cache, url, "--json"]))
  }

  /// Every file is complete in the cache, with exactly the fixture's bytes.
  func expectCached(_ files: [String], cache: String, origin: TestOrigin) async throws {
    for file in files {
      let url = origin.url(file: file)
      let fixture = try mediaFixture(file)
      let state = try await status(cache, url)
      #expect(state.stateName == "complete", "\(file): \(state)")
      #expect(state.length == Int64(fixture.count), "\(file)")
      let cat = try await run(mediacache, ["cat", "--cache", cache, url])
      #expect(cat.status == 0, "\(file): \(cat.stderr)")
      #expect([UInt8](cat.stdout) == fixture, "\(file): cached bytes differ from the fixture")
    }
  }

  /// The origin saw every request for `first` before any for `others`.
  func expectFirst(_ first: String, before others: some Sequence<String>, origin: TestOrigin) throws {
    let requests = origin.allRequests()
    let last = try #require(requests.lastIndex { $0.name == first }, "no request for \(first)")
    let names = Set(others)
    let earliest = try #require(requests.firstIndex { names.contains($0.name) }, "no request for \(names)")
    #expect(last < earliest, "\(requests.map(\.name))")
  }

  @Test func cachesTheHighestBandwidthVariantAndFetchesNothingTheSecondTime() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try await withFileOrigin { origin in
      let master = origin.url(file: "hls/master.m3u8")
      let first = try await run(mediacache, ["fetch", "--hls", "--cache", cache, master])
      #expect(first.status == 0, "\(first.stderr)")
      // v0 has the highest BANDWIDTH (457216).
      #expect(first.text.hasPrefix("variant 0 of 3: BANDWIDTH=457216 RESOLUTION=320x180 "), "\(first.text)")
      let segmentBytes = try Self.variantFiles[0].reduce(0) { $0 + (try mediaFixture($1)).count }
      #expect(
        first.text.contains(
          "cached HLS \(origin.url(file: "hls/v0/index.m3u8")): 4 files (4 segments, 0 keys, 0 init sections), "
            + "\(segmentBytes) bytes; fetched \(segmentBytes) bytes from the origin"), "\(first.text)")
      try await expectCached(
        ["hls/master.m3u8", "hls/v0/index.m3u8"] + Self.variantFiles[0], cache: cache, origin: origin)
      // Nothing of the other variants was fetched.
      for file in Self.variantFiles[1] + Self.variantFiles[2] + ["hls/v1/index.m3u8", "hls/v2/index.m3u8"] {
        #expect(origin.requests(for: file).isEmpty, "\(file)")
      }
      for file in Self.variantFiles[0] { #expect(!origin.requests(for: file).isEmpty, "\(file)") }

      // Everything is cached: the second run sends no request at all, segments or playlists.
      let requestsBefore = origin.allRequests().count
      let second = try await run(mediacache, ["fetch", "--hls", "--cache", cache, master])
      #expect(second.status == 0, "\(second.stderr)")
      #expect(second.text.contains("fetched 0 bytes from the origin"), "\(second.text)")
      #expect(origin.allRequests().count == requestsBefore, "\(origin.allRequests().suffix(5))")
    }
  }

  /// A file root with `master.m3u8`: one variant (`video/`) with an `AUDIO` group of two renditions (`fr`
  /// listed first, `en` the `DEFAULT=YES` one), a `SUBTITLES` group of one, and an audio group no variant
  /// uses; each media playlist lists two segments of its own (bytes, not media: fetching does not decode).
  static func makeRenditionsRoot() throws -> TemporaryDirectory {
    let root = try TemporaryDirectory()
    func write(_ path: String, _ text: String) throws {
      let url = URL(fileURLWithPath: root.file(path))
      try FileManager.default.createDirectory(
        at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
      try Data(text.utf8).write(to: url)
    }
    try write(
      "master.m3u8",
      """
      #EXTM3U
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="fr",LANGUAGE="fr",URI="audio/fr.m3u8"
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="en",LANGUAGE="en",DEFAULT=YES,URI="audio/en.m3u8"
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="unused",NAME="x",URI="audio/unused.m3u8"
      #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="en",URI="subs/en.m3u8"
      #EXT-X-STREAM-INF:BANDWIDTH=100000,AUDIO="aud",SUBTITLES="subs"
      video/index.m3u8

      """)
    for (playlist, segments) in [
      ("video/index.m3u8", ["v0.ts", "v1.ts"]), ("audio/fr.m3u8", ["fr0.aac", "fr1.aac"]),
      ("audio/en.m3u8", ["en0.aac", "en1.aac"]), ("audio/unused.m3u8", ["u0.aac", "u1.aac"]),
      ("subs/en.m3u8", ["s0.vtt", "s1.vtt"]),
    ] {
      let directory = String(playlist.split(separator: "/")[0])
      var text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n"
      for (index, segment) in segments.enumerated() {
        text += "#EXTINF:2.0,\n\(segment)\n"
        try write("\(directory)/\(segment)", String(repeating: "\(directory) \(index) ", count: 4_000))
      }
      try write(playlist, text + "#EXT-X-ENDLIST\n")
    }
    return root
  }

  /// The chosen variant's audio and subtitle renditions are cached with it (a player of the set needs them;
  /// before, only the video was fetched and an offline player had no sound), and nothing of a group the
  /// variant does not use.
  @Test func theChosenVariantsRenditionsAreCachedWithIt() async throws {
    let root = try Self.makeRenditionsRoot()
    defer { root.cleanup() }
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try await withFileOrigin(root: root.path) { origin in
      let fetched = try await run(
        mediacache, ["fetch", "--hls", "--cache", cache, origin.url(file: "master.m3u8")])
      #expect(fetched.status == 0, "\(fetched.stderr)")
      #expect(
        fetched.text.contains("with 3 renditions: 8 files (8 segments, 0 keys, 0 init sections)"),
        "\(fetched.text)")
      for file in [
        "video/index.m3u8", "video/v0.ts", "video/v1.ts", "audio/en.m3u8", "audio/en0.aac", "audio/en1.aac",
        "audio/fr.m3u8", "audio/fr0.aac", "audio/fr1.aac", "subs/en.m3u8", "subs/s0.vtt", "subs/s1.vtt",
      ] {
        let state = try await status(cache, origin.url(file: file))
        #expect(state.stateName == "complete", "\(file): \(state)")
      }
      for file in ["audio/unused.m3u8", "audio/u0.aac"] {
        #expect(origin.requests(for: file).isEmpty, "\(file)")
      }
    }
  }

  @Test func variantsWithAKeyAndAnInitSection() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try await withFileOrigin { origin in
      let master = origin.url(file: "hls/master.m3u8")
      let encrypted = try await run(
        mediacache, ["fetch", "--hls", "--variant", "1", "--cache", cache, master])
      #expect(encrypted.status == 0, "\(encrypted.stderr)")
      #expect(encrypted.text.contains("5 files (4 segments, 1 key, 0 init sections)"), "\(encrypted.text)")
      try await expectCached(["hls/v1/index.m3u8"] + Self.variantFiles[1], cache: cache, origin: origin)
      #expect(origin.requests(for: "hls/v0/seg000.ts").isEmpty)

      // A media playlist given directly: no variant choice; the init section is cached before any segment
      // is asked for.
      let fragmented = try await run(
        mediacache, ["fetch", "--hls", "--cache", cache, origin.url(file: "hls/v2/index.m3u8")])
      #expect(fragmented.status == 0, "\(fragmented.stderr)")
      #expect(!fragmented.text.contains("variant"), "\(fragmented.text)")
      #expect(fragmented.text.contains("5 files (4 segments, 0 keys, 1 init section)"), "\(fragmented.text)")
      try await expectCached(["hls/v2/index.m3u8"] + Self.variantFiles[2], cache: cache, origin: origin)
      try expectFirst("hls/v2/init.mp4", before: Self.variantFiles[2].dropFirst(), origin: origin)
      try expectFirst("hls/v1/key.bin", before: Self.variantFiles[1].dropFirst(), origin: origin)

      let stats = try await run(mediacache, ["stats", "--cache", cache, "--json"])
      let counts = try decodeReport(CacheStatistics.self, stats)
      // master, two media playlists, 5 + 5 files.
      #expect(counts.objects == 13)
      #expect(counts.complete == 13)
    }
  }

  @Test func errorsNameTheVariantsOrTheFailingURI() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try await withFileOrigin { origin in
      let master = origin.url(file: "hls/master.m3u8")
      let outOfRange = try await run(
        mediacache, ["fetch", "--hls", "--variant", "3", "--cache", cache, master])
      #expect(outOfRange.status == 64)
      #expect(outOfRange.stderr.contains("--variant 3 is out of range; \(master) has 3 variants:"))
      #expect(outOfRange.stderr.contains("  2: BANDWIDTH=195792 RESOLUTION=192x108"), "\(outOfRange.stderr)")
      #expect(outOfRange.stderr.contains(origin.url(file: "hls/v2/index.m3u8")))
      #expect(origin.requests(for: "hls/v2/index.m3u8").isEmpty)

      let media = origin.url(file: "hls/v0/index.m3u8")
      let notMaster = try await run(
        mediacache, ["fetch", "--hls", "--variant", "0", "--cache", cache, media])
      #expect(notMaster.status == 64)
      #expect(notMaster.stderr.contains("is a media playlist"))

      let segment = origin.url(file: "hls/v0/seg000.ts")
      let notPlaylist = try await run(mediacache, ["fetch", "--hls", "--cache", cache, segment])
      #expect(notPlaylist.status == 1)
      #expect(notPlaylist.stderr.contains("\(segment) is not an HLS playlist"), "\(notPlaylist.stderr)")

      let withRange = try await run(
        mediacache, ["fetch", "--hls", "--range", "0-9", "--cache", cache, master])
      #expect(withRange.status == 64)
    }

    // A playlist naming a segment the origin does not have: exit 1 naming it; once it exists, a rerun
    // completes the set.
    let root = dir.file("root")
    try FileManager.default.createDirectory(atPath: "\(root)/show", withIntermediateDirectories: true)
    try Data(
      "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nseg000.ts\n#EXTINF:1,\nlate.ts\n#EXT-X-ENDLIST\n".utf8
    ).write(to: URL(fileURLWithPath: "\(root)/show/index.m3u8"))
    let segment = try mediaFixture("hls/v0/seg000.ts")
    try Data(segment).write(to: URL(fileURLWithPath: "\(root)/show/seg000.ts"))
    try await withFileOrigin(root: root) { origin in
      let playlist = origin.url(file: "show/index.m3u8")
      let failed = try await run(mediacache, ["fetch", "--hls", "--cache", cache, playlist])
      #expect(failed.status == 1)
      #expect(
        failed.stderr.contains("\(origin.url(file: "show/late.ts")): origin answered HTTP 404"),
        "\(failed.stderr)")
      try Data(segment.reversed()).write(to: URL(fileURLWithPath: "\(root)/show/late.ts"))
      let rerun = try await run(mediacache, ["fetch", "--hls", "--cache", cache, playlist])
      #expect(rerun.status == 0, "\(rerun.stderr)")
      let late = try await run(mediacache, ["cat", "--cache", cache, origin.url(file: "show/late.ts")])
      #expect([UInt8](late.stdout) == Array(segment.reversed()))
    }
  }
}
