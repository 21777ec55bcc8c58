import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// `mediacache fetch --dash` run as a separate process against the committed DASH fixture
/// (`Fixtures/media/dash`, made by ffmpeg's dash muxer) served by the test origin's `files` mode.
@Suite struct FetchDASHCommandTests {
  let mediacache = binary("mediacache")

  /// The fixture's files per representation: its init segment, then its media segments.
  static func files(_ representation: Int) -> [String] {
    let count = representation == 2 ? 5 : 4
    return ["dash/init-stream\(representation).m4s"]
      + (1...count).map { "dash/chunk-stream\(representation)-0000\($0).m4s" }
  }

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
      let cat = try await run(mediacache, ["cat", "--cache", cache, url])
      #expect(cat.status == 0, "\(file): \(cat.stderr)")
      #expect([UInt8](cat.stdout) == fixture, "\(file): cached bytes differ from the fixture")
    }
  }

  func bytes(_ files: [String]) throws -> Int { try files.reduce(0) { $0 + (try mediaFixture($1)).count } }

  @Test func cachesTheHighestBandwidthPerAdaptationSetAndFetchesNothingTheSecondTime() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try await withFileOrigin { origin in
      let mpd = origin.url(file: "dash/manifest.mpd")
      let first = try await run(mediacache, ["fetch", "--dash", "--cache", cache, mpd])
      #expect(first.status == 0, "\(first.stderr)")
      #expect(
        first.text.hasPrefix(
          "adaptation set 0 (video): representation '0' (bandwidth 300000, 320x180, avc1.4d400c) of 2\n"
            + "adaptation set 1 (audio): representation '2' (bandwidth 64000, mp4a.40.2) of 1\n"),
        "\(first.text)")
      let wanted = Self.files(0) + Self.files(2)
      let total = try bytes(wanted)
      #expect(
        first.text.contains(
          "cached DASH \(mpd): 2 representations, 11 files (9 media segments, 2 initialization segments), "
            + "\(total) bytes; fetched \(total) bytes from the origin"), "\(first.text)")
      try await expectCached(["dash/manifest.mpd"] + wanted, cache: cache, origin: origin)
      for file in Self.files(1) { #expect(origin.requests(for: file).isEmpty, "\(file)") }
      // Each initialization segment was complete before any segment after it was asked for.
      let names = origin.allRequests().map(\.name)
      for representation in [0, 2] {
        let initSegment = Self.files(representation)[0]
        let lastInit = try #require(names.lastIndex(of: initSegment))
        let firstMedia = try #require(
          names.firstIndex { Self.files(representation).dropFirst().contains($0) })
        #expect(lastInit < firstMedia, "\(names)")
      }

      // Everything is cached: the second run sends no request at all, MPD or segments.
      let requestsBefore = origin.allRequests().count
      let second = try await run(mediacache, ["fetch", "--dash", "--cache", cache, mpd])
      #expect(second.status == 0, "\(second.stderr)")
      #expect(second.text.contains("\(total) bytes; fetched 0 bytes from the origin"), "\(second.text)")
      #expect(origin.allRequests().count == requestsBefore, "\(origin.allRequests().suffix(5))")
    }
  }

  @Test func theRepresentationOptionChoosesWhereItMatches() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try await withFileOrigin { origin in
      let mpd = origin.url(file: "dash/manifest.mpd")
      // '1' is in the video set; the audio set has no '1' and keeps its highest bandwidth.
      let chosen = try await run(
        mediacache, ["fetch", "--dash", "--representation", "1", "--cache", cache, mpd])
      #expect(chosen.status == 0, "\(chosen.stderr)")
      #expect(chosen.text.contains("adaptation set 0 (video): representation '1' (bandwidth 100000, 192x108"))
      #expect(chosen.text.contains("adaptation set 1 (audio): representation '2'"), "\(chosen.text)")
      try await expectCached(Self.files(1) + Self.files(2), cache: cache, origin: origin)
      for file in Self.files(0) { #expect(origin.requests(for: file).isEmpty, "\(file)") }

      // An ID no set has: a usage error listing what there is, and no segment fetched.
      let requestsBefore = origin.allRequests().count
      let unknown = try await run(
        mediacache, ["fetch", "--dash", "--representation", "9", "--cache", cache, mpd])
      #expect(unknown.status == 64)
      #expect(unknown.stderr.contains("--representation '9' matches no representation; \(mpd) has:"))
      #expect(
        unknown.stderr.contains(
          "  period 0 adaptation set 0 (video): '0' (bandwidth 300000, 320x180, avc1.4d400c), '1' (bandwidth 100000"
        ),
        "\(unknown.stderr)")
      #expect(origin.allRequests().count == requestsBefore)

      let notDash = try await run(mediacache, ["fetch", "--representation", "1", "--cache", cache, mpd])
      #expect(notDash.status == 64)
      let both = try await run(mediacache, ["fetch", "--dash", "--hls", "--cache", cache, mpd])
      #expect(both.status == 64)
    }
  }

  /// Hand-written MPDs in a scratch tree: BaseURL chains, SegmentList and SegmentBase over the fixture's
  /// files, the segment limit, live and malformed MPDs.
  @Test func otherAddressingAndRefusals() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let root = dir.file("root")
    let fileManager = FileManager.default
    try fileManager.createDirectory(atPath: "\(root)/media/v", withIntermediateDirectories: true)
    try fileManager.createDirectory(atPath: "\(root)/show", withIntermediateDirectories: true)
    let copies = Self.files(1)
    for file in copies {
      try Data(try mediaFixture(file)).write(
        to: URL(fileURLWithPath: "\(root)/media/v/\((file as NSString).lastPathComponent)"))
    }
    func write(_ name: String, _ text: String) throws {
      try Data(text.utf8).write(to: URL(fileURLWithPath: "\(root)/show/\(name)"))
    }
    let segments = copies.dropFirst().map { "<SegmentURL media=\"\(($0 as NSString).lastPathComponent)\"/>" }
    try write(
      "list.mpd",
      """
      <?xml version="1.0"?>
      <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S">
        <BaseURL>../media/</BaseURL>
        <Period><AdaptationSet contentType="video"><BaseURL>v/</BaseURL>
          <Representation id="list" bandwidth="1">
            <SegmentList duration="1"><Initialization sourceURL="init-stream1.m4s"/>\(segments.joined())</SegmentList>
          </Representation>
        </AdaptationSet>
        <AdaptationSet contentType="audio"><Representation id="whole">
          <BaseURL>v/chunk-stream1-00004.m4s</BaseURL><SegmentBase indexRange="0-99"><Initialization range="0-9"/></SegmentBase>
        </Representation></AdaptationSet></Period>
      </MPD>
      """)
    try write(
      "live.mpd",
      #"<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic"><Period/></MPD>"#)
    try write("broken.mpd", "<MPD><Period></MPD>")
    // 9 MiB: past the 8 MiB limit (a comment, so that only the size is wrong).
    try write("huge.mpd", "<MPD><!--" + String(repeating: "x", count: 9 << 20) + "--></MPD>")
    try await withFileOrigin(root: root) { origin in
      let list = origin.url(file: "show/list.mpd")
      let fetched = try await run(mediacache, ["fetch", "--dash", "--cache", cache, list])
      #expect(fetched.status == 0, "\(fetched.stderr)")
      // The SegmentBase file is already one of the list's files: 5 distinct files.
      #expect(
        fetched.text.contains("2 representations, 5 files (5 media segments, 2 initialization segments)"),
        "\(fetched.text)")
      for file in copies {
        let url = origin.url(file: "media/v/\((file as NSString).lastPathComponent)")
        let state = try await status(cache, url)
        #expect(state.stateName == "complete", "\(url): \(state)")
      }

      let limited = dir.file("limited")
      let tooMany = try await run(
        mediacache, ["fetch", "--dash", "--max-segments", "5", "--cache", limited, list])
      #expect(tooMany.status == 1)
      #expect(
        tooMany.stderr.contains(
          "\(list): Period 0 > AdaptationSet 1 > Representation 'whole': more than 5 segments"),
        "\(tooMany.stderr)")

      let live = origin.url(file: "show/live.mpd")
      let refused = try await run(mediacache, ["fetch", "--dash", "--cache", cache, live])
      #expect(refused.status == 1)
      #expect(refused.stderr.contains("\(live) is a live MPD (type=\"dynamic\")"), "\(refused.stderr)")

      let broken = origin.url(file: "show/broken.mpd")
      let malformed = try await run(mediacache, ["fetch", "--dash", "--cache", cache, broken])
      #expect(malformed.status == 1)
      #expect(
        malformed.stderr.contains("\(broken) is not a DASH MPD: malformed XML at line 1"),
        "\(malformed.stderr)")

      let huge = origin.url(file: "show/huge.mpd")
      let tooLarge = try await run(mediacache, ["fetch", "--dash", "--cache", cache, huge])
      #expect(tooLarge.status == 1)
      #expect(
        tooLarge.stderr.contains(
          "\(huge): MPD of \((9 << 20) + 18) bytes is larger than the limit of 8388608 bytes"),
        "\(tooLarge.stderr)")
      // Not read past the limit (the reader fetches whole chunks: 1 MiB).
      #expect(origin.totalBodyBytes(for: "show/huge.mpd") <= (8 << 20) + (1 << 20), "read past the limit")

      let notXML = origin.url(file: "media/v/init-stream1.m4s")
      let binary = try await run(mediacache, ["fetch", "--dash", "--cache", cache, notXML])
      #expect(binary.status == 1)
      #expect(binary.stderr.contains("\(notXML) is not a DASH MPD"), "\(binary.stderr)")
    }
  }
}
