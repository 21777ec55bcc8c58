import Foundation
import MediaCacheProxy
import MediaCacheStreaming
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// DASH through a real `mediacache proxy`: streams made by `ffmpeg -f dash` in a temporary directory, served
/// by the test origin's `files` mode, played by ffmpeg and GStreamer through the proxy.
@Suite struct ProxyDASHTests {
  /// A temporary file root with `dash/stream.mpd` (SegmentTemplate, video and audio, 4 s) and
  /// `single/sb.mp4` with `single/sb.mpd` (SegmentBase with indexRange: byte ranges of one file).
  static func makeStreams() async throws -> TemporaryDirectory {
    let root = try TemporaryDirectory()
    for directory in ["dash", "single"] {
      try FileManager.default.createDirectory(
        atPath: root.file(directory), withIntermediateDirectories: true)
    }
    let source = [
      "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=4:size=160x90:rate=25", "-f",
      "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac",
    ]
    _ = try await runMediaTool(
      "ffmpeg",
      source + ["-f", "dash", "-seg_duration", "1", "-use_timeline", "0", root.file("dash/stream.mpd")])
    _ = try await runMediaTool(
      "ffmpeg",
      source + ["-an", "-movflags", "+dash+global_sidx", "-f", "mp4", root.file("single/sb.mp4")])
    let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: root.file("single/sb.mp4"))))
    let atoms = topLevelAtoms(file)
    let sidx = try #require(atoms["sidx"])
    let moof = try #require(atoms["moof"])
    let mpd = """
      <?xml version="1.0" encoding="utf-8"?>
      <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011"
        type="static" mediaPresentationDuration="PT4.0S" minBufferTime="PT2.0S">
        <Period id="0">
          <AdaptationSet contentType="video" mimeType="video/mp4" segmentAlignment="true">
            <Representation id="v" codecs="avc1.f4000b" bandwidth="120000" width="160" height="90">
              <BaseURL>sb.mp4</BaseURL>
              <SegmentBase indexRange="\(sidx)-\(moof - 1)"><Initialization range="0-\(sidx - 1)"/></SegmentBase>
            </Representation>
          </AdaptationSet>
        </Period>
      </MPD>
      """
    try Data(mpd.utf8).write(to: URL(fileURLWithPath: root.file("single/sb.mpd")))
    return root
  }

  @Test func ffmpegDecodesADASHStreamThroughThePathFormLikeTheLocalFile() async throws {
    let streams = try await Self.makeStreams()
    defer { streams.cleanup() }
    try await withProxy(fileRoot: streams.path) { fixture in
      let local = try await frameHashes(streams.file("dash/stream.mpd"))
      let proxied = "\(fixture.endpoint)\(fixture.path(fixture.origin.url(file: "dash/stream.mpd")))"
      #expect(proxied.contains("/http/127.0.0.1:\(fixture.origin.port)/files/dash/stream.mpd"))
      let cold = try await frameHashes(proxied)
      #expect(cold == local)
      #expect(local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count == 100)
      // The segments were fetched by the proxy (they are in the cache now), not by ffmpeg directly.
      #expect(fixture.origin.requests(for: "dash/chunk-stream0-00001.m4s").count == 1)
      #expect(fixture.origin.allRequests().allSatisfy { !($0.headers["user-agent"] ?? "").contains("Lavf") })
      fixture.origin.resetRecords()
      let warm = try await frameHashes(proxied)
      #expect(warm == local)
      // Everything came from the cache; only the segment after the last one, which ffmpeg tries and the
      // origin does not have (a 404 is not cached), was asked for again.
      #expect(
        fixture.origin.allRequests().allSatisfy {
          $0.status == 404 && $0.name == "dash/chunk-stream0-00005.m4s"
        },
        "\(fixture.origin.allRequests())")
      // The MPD's relative references came through byte for byte.
      let original = try String(contentsOfFile: streams.file("dash/stream.mpd"), encoding: .utf8)
      let served = String(
        decoding: try await fixture.request(fixture.path(fixture.origin.url(file: "dash/stream.mpd"))).body,
        as: UTF8.self)
      #expect(served.contains(#"media="chunk-stream$RepresentationID$-$Number%05d$.m4s""#))
      #expect(original.contains(#"media="chunk-stream$RepresentationID$-$Number%05d$.m4s""#))
    }
  }

  @Test func absoluteURLsAndTheQueryFormAreRewrittenSoEverythingGoesThroughTheProxy() async throws {
    let streams = try await Self.makeStreams()
    defer { streams.cleanup() }
    try await withProxy(fileRoot: streams.path) { fixture in
      // An MPD whose segments are named by absolute URLs at the origin.
      let original = try String(contentsOfFile: streams.file("dash/stream.mpd"), encoding: .utf8)
      let absolute = original.replacingOccurrences(
        of: "<Period ", with: "<BaseURL>\(fixture.origin.url(file: "dash/"))</BaseURL>\n\t<Period ")
      try Data(absolute.utf8).write(to: URL(fileURLWithPath: streams.file("dash/absolute.mpd")))
      let local = try await frameHashes(streams.file("dash/stream.mpd"))
      for path in [
        fixture.path(fixture.origin.url(file: "dash/absolute.mpd")),
        ProxyServer.queryFormPath(for: fixture.origin.url(file: "dash/stream.mpd")),
        ProxyServer.queryFormPath(for: fixture.origin.url(file: "dash/absolute.mpd")),
      ] {
        let served = String(decoding: try await fixture.request(path).body, as: UTF8.self)
        #expect(
          served.contains("<BaseURL>/http/127.0.0.1:\(fixture.origin.port)/files/dash/</BaseURL>"),
          "\(served)")
        fixture.origin.resetRecords()
        let proxied = try await frameHashes("\(fixture.endpoint)\(path)")
        #expect(proxied == local, "\(path)")
        // ffmpeg never reached the origin itself: every origin request came from the proxy.
        #expect(
          fixture.origin.allRequests().allSatisfy { !($0.headers["user-agent"] ?? "").contains("Lavf") })
      }
    }
  }

  @Test func segmentBaseIndexRangeIsServedByRangeRequests() async throws {
    let streams = try await Self.makeStreams()
    defer { streams.cleanup() }
    try await withProxy(fileRoot: streams.path) { fixture in
      let mpdURL = fixture.origin.url(file: "single/sb.mpd")
      let served = String(decoding: try await fixture.request(fixture.path(mpdURL)).body, as: UTF8.self)
      let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: streams.file("single/sb.mp4"))))
      let atoms = topLevelAtoms(file)
      let (sidx, moof) = (try #require(atoms["sidx"]), try #require(atoms["moof"]))
      #expect(served.contains(#"indexRange="\#(sidx)-\#(moof - 1)""#))
      #expect(served.contains("<BaseURL>sb.mp4</BaseURL>"))
      // The BaseURL resolved against the proxied MPD, asked for the index range as a player does.
      let media = fixture.path(fixture.origin.url(file: "single/sb.mp4"))
      let index = try await fixture.request(media, headers: [("Range", "bytes=\(sidx)-\(moof - 1)")])
      #expect(index.status == 206)
      #expect(index.header("Content-Range") == "bytes \(sidx)-\(moof - 1)/\(file.count)")
      #expect(index.body == Array(file[sidx..<moof]))
      #expect(Array(index.body[4..<8]) == Array("sidx".utf8))

      let local = try await frameHashes(streams.file("single/sb.mpd"))
      let proxied = try await frameHashes("\(fixture.endpoint)\(fixture.path(mpdURL))")
      #expect(proxied == local)
      #expect(local.split(separator: "\n").filter { $0.hasPrefix("0,") }.count == 100)
    }
  }

  @Test(arguments: ["dash/stream.mpd", "single/sb.mpd"])
  func gstreamerPlaysTheMPDThroughTheProxy(file: String) async throws {
    guard await (try? run(try mediaTool("gst-inspect-1.0"), ["dashdemux"]))?.status == 0 else { return }
    let streams = try await Self.makeStreams()
    defer { streams.cleanup() }
    try await withProxy(fileRoot: streams.path) { fixture in
      let uri = "\(fixture.endpoint)\(fixture.path(fixture.origin.url(file: file)))"
      let result = try await blocking {
        try runOnThisThread(
          try mediaTool("timeout"),
          [
            "120", try mediaTool("gst-launch-1.0"), "-q", "playbin", "uri=\(uri)", "video-sink=fakesink",
            "audio-sink=fakesink",
          ])
      }
      #expect(result.status == 0, "\(result.stderr)")
      let media = fixture.origin.allRequests().filter {
        $0.name.hasSuffix(".m4s") || $0.name.hasSuffix(".mp4")
      }
      #expect(!media.isEmpty)
      #expect(
        fixture.origin.allRequests().allSatisfy { !($0.headers["user-agent"] ?? "").contains("GStreamer") })
      if file == "single/sb.mpd" {
        // dashdemux read the SegmentBase index and fragments by byte range, through the proxy.
        #expect(!fixture.origin.requests(for: "single/sb.mp4").isEmpty)
      }
    }
  }

  @Test func liveMPDsAreFetchedAgainAndStaticOnesCached() async throws {
    let streams = try await Self.makeStreams()
    defer { streams.cleanup() }
    let original = try String(contentsOfFile: streams.file("dash/stream.mpd"), encoding: .utf8)
    let live = original.replacingOccurrences(of: #"type="static""#, with: #"type="dynamic""#)
    try Data(live.utf8).write(to: URL(fileURLWithPath: streams.file("dash/live.mpd")))
    try await withProxy(fileRoot: streams.path) { fixture in
      _ = try await fixture.request(fixture.path(fixture.origin.url(file: "dash/stream.mpd")))
      fixture.origin.resetRecords()
      for _ in 0..<3 {
        let response = try await fixture.request(fixture.path(fixture.origin.url(file: "dash/live.mpd")))
        #expect(response.status == 200)
        #expect(response.header("ETag") == nil)
        _ = try await fixture.request(fixture.path(fixture.origin.url(file: "dash/stream.mpd")))
      }
      // Every request reached the origin (the first one of a URL may take two origin requests: its first
      // read is dropped once the proxy knows it is a playlist or MPD and has to be read whole).
      #expect(fixture.origin.requests(for: "dash/live.mpd").count >= 3)
      #expect(fixture.origin.requests(for: "dash/stream.mpd").isEmpty)
    }
  }

  @Test func malformedOversizeAndNonMPDBodies() async throws {
    let root = try TemporaryDirectory()
    defer { root.cleanup() }
    try Data("<MPD type=\"static\"><Period></MPD>".utf8).write(to: URL(fileURLWithPath: root.file("bad.mpd")))
    var big = Data("<MPD type=\"static\">".utf8)
    big.append(Data(repeating: UInt8(ascii: " "), count: MPDRewriter.maxManifestBytes))
    big.append(Data("</MPD>".utf8))
    try big.write(to: URL(fileURLWithPath: root.file("big.mpd")))
    let notMPD = Data("just some text that is not XML\n".utf8)
    try notMPD.write(to: URL(fileURLWithPath: root.file("text.mpd")))
    try await withProxy(fileRoot: root.path) { fixture in
      let bad = try await fixture.request(fixture.path(fixture.origin.url(file: "bad.mpd")))
      let badText = String(decoding: bad.body, as: UTF8.self)
      #expect(bad.status == 502)
      #expect(
        badText.contains("not well-formed XML") && badText.split(separator: "\n").count == 1, "\(badText)")
      let oversize = try await fixture.request(fixture.path(fixture.origin.url(file: "big.mpd")))
      #expect(oversize.status == 502)
      #expect(String(decoding: oversize.body, as: UTF8.self).contains("larger than the proxy accepts"))
      let text = try await fixture.request(fixture.path(fixture.origin.url(file: "text.mpd")))
      #expect(text.status == 200)
      #expect(text.body == Array(notMPD))
      // The proxy is still serving.
      #expect(try await fixture.request("/metrics").status == 200)
    }
  }
}
