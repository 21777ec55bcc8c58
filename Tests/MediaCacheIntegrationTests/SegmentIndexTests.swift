import Foundation
import MediaCache
import MediaCacheStreaming
import MediaCacheTestSupport
import Testing

/// A DASH representation addressed by `SegmentBase` (one fragmented MP4 file, its `sidx` at `indexRange`, as
/// DASH's on-demand profile has it): the preload reads the index and fetches only the subsegments of the first
/// seconds, not the whole file, and with the origin stopped those play through the proxy. The file is made by
/// ffmpeg (`global_sidx`) from the fixture, video only.
@Suite struct SegmentIndexTests {
  /// The top-level boxes of `bytes`: type, start and end.
  func boxes(_ bytes: [UInt8]) -> [(type: String, range: Range<Int64>)] {
    var result: [(String, Range<Int64>)] = []
    var offset = 0
    while offset + 8 <= bytes.count {
      let size = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
      guard size >= 8 else { break }
      result.append(
        (
          String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self),
          Int64(offset)..<Int64(offset + size)
        ))
      offset += size
    }
    return result
  }

  /// A fragmented, video-only copy of faststart.mp4 (a fragment per 1 s key frame) with one `sidx`, written
  /// to `path`; returns its bytes.
  func makeIndexedFile(_ path: String) async throws -> [UInt8] {
    _ = try await runMediaTool(
      "ffmpeg",
      [
        "-nostdin", "-v", "error", "-y", "-i", "\(mediaFixturesDirectory)/faststart.mp4", "-an", "-c", "copy",
        "-movflags", "frag_keyframe+empty_moov+default_base_moof+global_sidx", path,
      ])
    return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
  }

  @Test func theIndexGivesEachFragmentsBytesAndStart() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let bytes = try await makeIndexedFile(directory.file("indexed.mp4"))
    let top = boxes(bytes)
    let sidx = try #require(top.first { $0.type == "sidx" }).range
    let fragments = top.filter { $0.type == "moof" }.map(\.range.lowerBound)
    let mdatEnds = top.filter { $0.type == "mdat" }.map(\.range.upperBound)
    let index = try MP4SegmentIndex.parse(
      Array(bytes[Int(sidx.lowerBound)..<Int(sidx.upperBound)]), base: sidx.lowerBound,
      fileLength: Int64(bytes.count), url: "indexed.mp4")
    // One reference per moof + mdat pair, one a second (the fixture has a key frame each second).
    #expect(index.references.map(\.range) == zip(fragments, mdatEnds).map { $0..<$1 })
    #expect(index.references.map(\.start) == [0, 1, 2, 3])
    #expect(index.ranges(before: 2.75) == [fragments[0]..<mdatEnds[2]])
    #expect(index.ranges(before: 0) == [fragments[0]..<mdatEnds[0]])

    // Damaged indexes are refused with the reason, never read past.
    let piece = Array(bytes[Int(sidx.lowerBound)..<Int(sidx.upperBound)])
    func refusal(_ damaged: [UInt8], fileLength: Int64? = nil) -> String {
      do {
        _ = try MP4SegmentIndex.parse(damaged, base: sidx.lowerBound, fileLength: fileLength, url: "x.mp4")
        return "accepted"
      } catch {
        return "\(error.code): \(error)"
      }
    }
    var cut = piece
    cut.removeLast(20)
    cut[3] = UInt8(cut.count)  // a box that ends inside the last reference
    #expect(
      refusal(cut).contains("invalidTable: x.mp4: track 0 'sidx': the box is cut short"), "\(refusal(cut))")
    var noScale = piece
    noScale.replaceSubrange(16..<20, with: [0, 0, 0, 0])
    #expect(refusal(noScale).contains("its time scale is 0"), "\(refusal(noScale))")
    #expect(
      refusal(piece, fileLength: 1000).contains("past the file's 1000 bytes"),
      "\(refusal(piece, fileLength: 1000))")
    var other = piece
    other.replaceSubrange(4..<8, with: Array("free".utf8))
    #expect(refusal(other).hasPrefix("invalidBox:"), "\(refusal(other))")
  }

  @Test func aSegmentBasePreloadFetchesTheFirstSubsegmentsOnly() async throws {
    try await withTemporaryDirectory { directory in
      let root = "\(directory)/media"
      try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
      let bytes = try await makeIndexedFile("\(root)/indexed.mp4")
      let top = boxes(bytes)
      let moov = try #require(top.first { $0.type == "moov" }).range
      let sidx = try #require(top.first { $0.type == "sidx" }).range
      let mpd = """
        <?xml version="1.0"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" \
        profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
          <Period><AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="300000">
            <BaseURL>indexed.mp4</BaseURL>
            <SegmentBase indexRange="\(sidx.lowerBound)-\(sidx.upperBound - 1)">
              <Initialization range="0-\(moov.upperBound - 1)"/>
            </SegmentBase>
          </Representation></AdaptationSet></Period>
        </MPD>
        """
      try Data(mpd.utf8).write(to: URL(fileURLWithPath: "\(root)/on-demand.mpd"))
      // 2 s preloaded, and 0.2 s in another cache: its plan holds the first fragment only (0 to 1 s; 1 s would
      // take the fragments starting before 1.75 s, which hold 2 s), and it must not play 2 s.
      let mpdURL = try await withFileOrigin(root: root) { origin in
        for (cache, seconds) in [("cache", "2"), ("short", "0.2")] {
          let result = try await run(
            binary("mediacache"),
            [
              "preload", "--cache", "\(directory)/\(cache)", "--chunk-size", "4096", "--seconds", seconds,
              origin.url(file: "on-demand.mpd"),
            ])
          #expect(result.status == 0, "\(result.stderr)")
        }
        let status = try await run(
          binary("mediacache"),
          ["status", "--cache", "\(directory)/cache", "--json", origin.url(file: "indexed.mp4")])
        struct Status: Decodable { var ranges: [[Int64]] }
        let ranges = try JSONDecoder().decode(Status.self, from: Data(status.text.utf8)).ranges
        // The initialization, the index and the fragments starting before 2.75 s (0, 1 and 2 s), in whole
        // 4 KiB chunks; the last fragment (3 s) is not fetched.
        let fragments = top.filter { $0.type == "moof" }
        let third = try #require(top.filter { $0.type == "mdat" }.dropFirst(2).first).range.upperBound
        #expect(ranges.count == 1 && ranges[0][0] == 0, "\(ranges)")
        let end = try #require(ranges.first?.last)
        #expect(end >= third, "cached to \(end), the third fragment ends at \(third)")
        #expect(end < fragments[3].range.lowerBound + 4096, "cached to \(end): the last fragment was fetched")
        return origin.url(file: "on-demand.mpd")
      }
      // The origin is stopped: played through the proxy from what was preloaded, frame for frame as the file.
      let local = try await frameHashes("\(root)/indexed.mp4", duration: 2)
      #expect(local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count == 50)
      for (cache, enough) in [("cache", true), ("short", false)] {
        let (proxy, port) = try await startProxy(cache: "\(directory)/\(cache)", [])
        defer { proxy.kill() }
        let proxied = "http://127.0.0.1:\(port)\(try #require(ProxyPathForm.path(for: mpdURL)))"
        let played = try? await frameHashes(proxied, duration: 2)
        if enough {
          #expect(played == local, "2 s preloaded did not play the same")
        } else {
          #expect(played != local, "the first fragment alone played 2 s")
        }
      }
    }
  }
}
