import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Synchronization

/// A value threads share under a lock (a `Mutex` cannot be captured by an escaping closure).
final class Shared<Value: Sendable>: Sendable {
  private let storage: Mutex<Value>
  init(_ value: Value) { storage = Mutex(value) }
  func update(_ change: (inout Value) -> Void) { storage.withLock { change(&$0) } }
  var value: Value { storage.withLock { $0 } }
}

/// The objects the soak's players read: progressive objects, an HLS playlist's and an MPD's segments (all the
/// origin's `normal`-mode objects), together three times `SoakSizes.maxSize`; two of them pinned. With an
/// HTTPS origin, every third progressive object (none pinned, not the changed one) is read over HTTPS.
struct SoakWorkingSet: Sendable {
  var objects: [SoakObject]
  var hlsSegments: [SoakObject]
  var dashSegments: [SoakObject]
  var pinned: [SoakObject]
  /// The object whose ETag changes during the run (the most popular one not pinned).
  var changed: SoakObject
  var playlistTarget: String
  var mpdTarget: String

  var all: [SoakObject] { objects + hlsSegments + dashSegments }
  var bytes: Int { all.reduce(0) { $0 + $1.size } }

  /// Makes the objects and writes the playlist and the MPD (whose segment URIs are absolute origin URLs,
  /// which the proxy rewrites) under `files`, the origin's file root.
  static func make(origin: TestOrigin, tls: SoakTLSOrigin?, files: String, random: inout SeededRandom)
    -> SoakWorkingSet
  {
    func object(_ prefix: String, _ sizes: ClosedRange<Int>) -> SoakObject {
      let name = "\(prefix)-\(random.token())"
      let size = Int.random(in: sizes, using: &random)
      return SoakObject(name: name, size: size, url: origin.url(.normal, name, size: size))
    }
    let hls = (0..<SoakSizes.segments).map { _ in object("hls", 400_000...1_600_000) }
    let dash = (0..<SoakSizes.segments).map { _ in object("dash", 400_000...1_600_000) }
    var objects: [SoakObject] = []
    var total = (hls + dash).reduce(0) { $0 + $1.size }
    while total < 3 * SoakSizes.maxSize {
      objects.append(object("progressive", 2_000_000...9_000_000))
      total += objects.last!.size
    }
    if let tls {
      objects = objects.enumerated().map { index, object in
        index % 3 != 1
          ? object : SoakObject(name: object.name, size: object.size, url: tls.url(for: object.url))
      }
    }
    var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n"
    for segment in hls { playlist += "#EXTINF:4.0,\n\(segment.url)\n" }
    playlist += "#EXT-X-ENDLIST\n"
    var mpd = """
      <?xml version="1.0" encoding="UTF-8"?>
      <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT\(4 * dash.count)S" \
      minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-main:2011">
        <Period>
          <AdaptationSet mimeType="video/mp4" segmentAlignment="true">
            <Representation id="v" bandwidth="2000000" codecs="avc1.64001f" width="1280" height="720">
              <SegmentList timescale="1" duration="4">

      """
    for segment in dash {
      mpd +=
        "            <SegmentURL media=\"\(segment.url.replacingOccurrences(of: "&", with: "&amp;"))\"/>\n"
    }
    mpd +=
      "          </SegmentList>\n        </Representation>\n      </AdaptationSet>\n    </Period>\n</MPD>\n"
    try? playlist.write(toFile: "\(files)/hls/index.m3u8", atomically: true, encoding: .utf8)
    try? mpd.write(toFile: "\(files)/dash/manifest.mpd", atomically: true, encoding: .utf8)
    let base = "/http/\(origin.baseURL.dropFirst("http://".count))/files"
    return SoakWorkingSet(
      objects: objects, hlsSegments: hls, dashSegments: dash, pinned: [objects[2], objects[3]],
      changed: objects[0], playlistTarget: "\(base)/hls/index.m3u8", mpdTarget: "\(base)/dash/manifest.mpd")
  }
}
