import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCacheProxy
@testable import MediaCacheStreaming

@Suite struct HLSPlaylistTests {
  let base = URL(string: "https://cdn.example.com/videos/show/master.m3u8?token=abc")!

  /// A transform that makes the target visible: `P(<absolute URL>)`.
  func marked(_ url: URL) -> String { "P(\(url.absoluteString))" }

  // MARK: Recognising

  @Test func contentTypesAndExtensionsAreRecognised() {
    let body = Array("#EXTM3U\n#EXT-X-VERSION:3\n".utf8)
    let notPlaylist = Array("<html>".utf8)
    for type in [
      "application/vnd.apple.mpegurl", "Application/X-MpegURL", "audio/mpegurl", "audio/x-mpegurl",
      "application/vnd.apple.mpegurl; charset=utf-8", " audio/x-mpegurl ;charset=UTF-8",
    ] {
      #expect(HLSPlaylist.isPlaylist(contentType: type, url: "https://h/a", prefix: notPlaylist), "\(type)")
    }
    #expect(HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/a/b.m3u8?x=1", prefix: body))
    #expect(
      HLSPlaylist.isPlaylist(contentType: "application/octet-stream", url: "https://h/a.M3U", prefix: body))
    #expect(
      HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/a.m3u8", prefix: [0xEF, 0xBB, 0xBF] + body))
    // The extension alone, or the body alone, is not enough.
    #expect(!HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/a.m3u8", prefix: notPlaylist))
    #expect(!HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/a.ts", prefix: body))
    #expect(!HLSPlaylist.isPlaylist(contentType: "video/mp2t", url: "https://h/a.ts?f=.m3u8", prefix: body))
    #expect(!HLSPlaylist.isPlaylist(contentType: "text/plain", url: "https://h/a.m3u8", prefix: [UInt8]()))
    #expect(!HLSPlaylist.isPlaylist(contentType: "application/mpegurlx", url: "https://h/a", prefix: body))
    // The path is found however it is spelled: case, a doubled letter before it, an escape.
    #expect(HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/a.mM3U8", prefix: body) == false)
    #expect(HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/amm3u.M3u8", prefix: body))
    #expect(HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/a.%6D3u8", prefix: body))
    #expect(HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/a%2Em3u", prefix: body))
    #expect(!HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/m3/u.mp4", prefix: body))
  }

  // MARK: Rewriting

  @Test func masterPlaylistURIsAreRewrittenAndNothingElse() throws {
    let text = """
      #EXTM3U
      #EXT-X-VERSION:6
      # a comment with "quotes", and http://not.a/uri
      #EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI="skd://key-42",KEYFORMAT="com.apple.streamingkeydelivery"
      #EXT-X-SESSION-KEY:METHOD=AES-128,URI="/keys/session.bin"
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English, US",LANGUAGE="en",URI="audio/en.m3u8"
      #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="CC1",INSTREAM-ID="CC1"

      #EXT-X-STREAM-INF:BANDWIDTH=1280000,CODECS="avc1.4d401f,mp4a.40.2",RESOLUTION=640x360,AUDIO="aud"
      low/index.m3u8
      #EXT-X-STREAM-INF:BANDWIDTH=2560000,CODECS="avc1.4d401f,mp4a.40.2",AUDIO="aud"
      /root/mid/index.m3u8?sig=1
      #EXT-X-STREAM-INF:BANDWIDTH=7680000
      ../other/high.m3u8
      #EXT-X-STREAM-INF:BANDWIDTH=9000000
      http://elsewhere.example.net/abs/top.m3u8
      #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,URI="low/iframe.m3u8",CODECS="avc1.4d401f"

      """
    let expected = """
      #EXTM3U
      #EXT-X-VERSION:6
      # a comment with "quotes", and http://not.a/uri
      #EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI="skd://key-42",KEYFORMAT="com.apple.streamingkeydelivery"
      #EXT-X-SESSION-KEY:METHOD=AES-128,URI="P(https://cdn.example.com/keys/session.bin)"
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English, US",LANGUAGE="en",URI="P(https://cdn.example.com/videos/show/audio/en.m3u8)"
      #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="CC1",INSTREAM-ID="CC1"

      #EXT-X-STREAM-INF:BANDWIDTH=1280000,CODECS="avc1.4d401f,mp4a.40.2",RESOLUTION=640x360,AUDIO="aud"
      P(https://cdn.example.com/videos/show/low/index.m3u8)
      #EXT-X-STREAM-INF:BANDWIDTH=2560000,CODECS="avc1.4d401f,mp4a.40.2",AUDIO="aud"
      P(https://cdn.example.com/root/mid/index.m3u8?sig=1)
      #EXT-X-STREAM-INF:BANDWIDTH=7680000
      P(https://cdn.example.com/videos/other/high.m3u8)
      #EXT-X-STREAM-INF:BANDWIDTH=9000000
      P(http://elsewhere.example.net/abs/top.m3u8)
      #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,URI="P(https://cdn.example.com/videos/show/low/iframe.m3u8)",CODECS="avc1.4d401f"

      """
    #expect(try HLSPlaylist.rewrite(text, playlistURL: base, transform: marked) == expected)
  }

  @Test func mediaPlaylistWithKeysMapsAndOtherSchemes() throws {
    let text = """
      #EXTM3U
      #EXT-X-TARGETDURATION:6
      #EXT-X-MAP:URI="init.mp4",BYTERANGE="720@0"
      #EXT-X-KEY:METHOD=AES-128,URI="https://keys.example.com/k1?a=1,b=2",IV=0x0123456789ABCDEF0123456789ABCDEF
      #EXTINF:6.0,
      seg0.m4s
      #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://asset/7",KEYFORMAT="com.apple.streamingkeydelivery"
      #EXTINF:6.0,title, with comma
      data:video/mp2t;base64,AAAA
      #EXT-X-KEY:METHOD=NONE
      #EXTINF:5.5,
        seg2.m4s\t
      #EXT-X-ENDLIST
      """
    let expected = """
      #EXTM3U
      #EXT-X-TARGETDURATION:6
      #EXT-X-MAP:URI="P(https://cdn.example.com/videos/show/init.mp4)",BYTERANGE="720@0"
      #EXT-X-KEY:METHOD=AES-128,URI="P(https://keys.example.com/k1?a=1,b=2)",IV=0x0123456789ABCDEF0123456789ABCDEF
      #EXTINF:6.0,
      P(https://cdn.example.com/videos/show/seg0.m4s)
      #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://asset/7",KEYFORMAT="com.apple.streamingkeydelivery"
      #EXTINF:6.0,title, with comma
      data:video/mp2t;base64,AAAA
      #EXT-X-KEY:METHOD=NONE
      #EXTINF:5.5,
        P(https://cdn.example.com/videos/show/seg2.m4s)\t
      #EXT-X-ENDLIST
      """
    // No final newline in, none out.
    #expect(try HLSPlaylist.rewrite(text, playlistURL: base, transform: marked) == expected)
  }

  @Test func lowLatencyTagsAreRewritten() throws {
    let text = """
      #EXTM3U
      #EXT-X-TARGETDURATION:4
      #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.0
      #EXT-X-PART:DURATION=0.33,URI="part1.m4s",INDEPENDENT=YES
      #EXT-X-PRELOAD-HINT:TYPE=PART,URI="part2.m4s"
      #EXT-X-RENDITION-REPORT:URI="../alt/live.m3u8",LAST-MSN=10,LAST-PART=2

      """
    let out = try HLSPlaylist.rewrite(text, playlistURL: base, transform: marked)
    #expect(
      out.contains(
        #"#EXT-X-PART:DURATION=0.33,URI="P(https://cdn.example.com/videos/show/part1.m4s)",INDEPENDENT=YES"#))
    #expect(
      out.contains(#"#EXT-X-PRELOAD-HINT:TYPE=PART,URI="P(https://cdn.example.com/videos/show/part2.m4s)""#))
    #expect(
      out.contains(
        #"#EXT-X-RENDITION-REPORT:URI="P(https://cdn.example.com/videos/alt/live.m3u8)",LAST-MSN=10,LAST-PART=2"#
      ))
    #expect(out.contains("#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.0\n"))
  }

  /// The URIs of content steering (`SERVER-URI`), interstitials (`X-ASSET-URI`, `X-ASSET-LIST` of an
  /// `EXT-X-DATERANGE`) and a Roku image stream are rewritten too (before, in the query form a relative one
  /// resolved against the proxy, and an absolute one left the proxy); a date range without one is kept.
  @Test func steeringInterstitialAndImageStreamURIsAreRewritten() throws {
    let text = """
      #EXTM3U
      #EXT-X-CONTENT-STEERING:SERVER-URI="steer.json",PATHWAY-ID="CDN-A"
      #EXT-X-DATERANGE:ID="ad1",CLASS="com.apple.hls.interstitial",START-DATE="2024-01-01T00:00:00Z",X-ASSET-URI="https://ads.example/ad.m3u8"
      #EXT-X-DATERANGE:ID="ad2",CLASS="com.apple.hls.interstitial",START-DATE="2024-01-01T00:01:00Z",X-ASSET-LIST="list.json"
      #EXT-X-DATERANGE:ID="splice",START-DATE="2024-01-01T00:02:00Z",SCTE35-OUT=0xFC302000
      #EXT-X-DATERANGE:ID="odd",ID="twice",X-COM.EXAMPLE=,START-DATE="2024-01-01T00:03:00Z"
      #EXT-X-IMAGE-STREAM-INF:BANDWIDTH=5000,RESOLUTION=320x180,CODECS="jpeg",URI="images/index.m3u8"
      #EXT-X-STREAM-INF:BANDWIDTH=100000
      v.m3u8

      """
    let out = try HLSPlaylist.rewrite(text, playlistURL: base, transform: marked)
    for rewritten in [
      #"SERVER-URI="P(https://cdn.example.com/videos/show/steer.json)",PATHWAY-ID="CDN-A""#,
      #"X-ASSET-URI="P(https://ads.example/ad.m3u8)""#,
      #"X-ASSET-LIST="P(https://cdn.example.com/videos/show/list.json)""#,
      #"URI="P(https://cdn.example.com/videos/show/images/index.m3u8)""#,
      "#EXT-X-DATERANGE:ID=\"splice\",START-DATE=\"2024-01-01T00:02:00Z\",SCTE35-OUT=0xFC302000\n",
      // An ad marker whose attribute list does not parse, naming no asset: kept, not a failure.
      "#EXT-X-DATERANGE:ID=\"odd\",ID=\"twice\",X-COM.EXAMPLE=,START-DATE=\"2024-01-01T00:03:00Z\"\n",
    ] {
      #expect(out.contains(rewritten), "\(rewritten)\n\(out)")
    }
  }

  @Test func lineEndingsByteOrderMarkAndBlankLinesAreKept() throws {
    let text =
      "\u{FEFF}#EXTM3U\r\n#EXT-X-TARGETDURATION:2\r\n\r\n# note\r\n#EXTINF:2,\r\na.ts\r\n#EXTINF:2,\nb.ts\n\n"
    let out = try HLSPlaylist.rewrite(text, playlistURL: base, transform: marked)
    #expect(
      out
        == "\u{FEFF}#EXTM3U\r\n#EXT-X-TARGETDURATION:2\r\n\r\n# note\r\n#EXTINF:2,\r\n"
        + "P(https://cdn.example.com/videos/show/a.ts)\r\n#EXTINF:2,\n"
        + "P(https://cdn.example.com/videos/show/b.ts)\n\n")
    // Byte for byte: every line that holds no URI is unchanged, in the same place, with the same ending.
    let inLines = text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).map { Array($0) }
    let outLines = out.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).map { Array($0) }
    #expect(inLines.count == outLines.count)
    let uriLines: Set<[UInt8]> = [Array("a.ts\r".utf8), Array("b.ts".utf8)]
    for index in inLines.indices where !uriLines.contains(inLines[index]) {
      #expect(inLines[index] == outLines[index], "line \(index + 1)")
    }
  }

  @Test func identityTransformKeepsEveryByte() throws {
    let text = "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"https://k/x\"\n#EXTINF:1,\nhttps://h/s.ts?q=1\n"
    #expect(try HLSPlaylist.rewrite(text, playlistURL: base, transform: { $0.absoluteString }) == text)
  }

  @Test func unsafeReplacementsAreRefused() {
    let text = "#EXTM3U\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:1,\ns.ts\n"
    for bad in ["a\"b", "a\nb", "", "#x", "a\rb", "tab\tin", "del\u{7F}"] {
      do {
        let out = try HLSPlaylist.rewrite(text, playlistURL: base, transform: { _ in bad })
        Issue.record("\(bad.debugDescription) was accepted: \(out.debugDescription)")
      } catch {
        guard case .invalidReplacement(2, _) = error.kind else {
          Issue.record("\(bad.debugDescription): \(error)")
          continue
        }
      }
    }
    // Only the segment line gets a bad value: the error names line 4.
    #expect {
      _ = try HLSPlaylist.rewrite(
        text, playlistURL: base, transform: { $0.path.hasSuffix(".ts") ? "x\ny" : $0.absoluteString })
    } throws: { error in
      guard case .invalidReplacement(4, _) = (error as? HLSError)?.kind else { return false }
      return "\(error)".contains("line 4")
    }
  }

  // MARK: Parsing

  @Test func masterPlaylistVariantsAndRenditions() throws {
    let text = """
      #EXTM3U
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="English",DEFAULT=YES,URI="audio/en.m3u8"
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="Deutsch, DE",URI="audio/de.m3u8"
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="ac3",NAME="English 5.1",URI="/ac3/en.m3u8"
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="Muxed"
      #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,CODECS="avc1.4d401e,mp4a.40.2",AUDIO="aac",SUBTITLES="subs"
      v360/index.m3u8
      # a comment between tags
      #EXT-X-STREAM-INF:BANDWIDTH=5000000,RESOLUTION=1920x1080,CODECS="avc1.640028,ac-3",AUDIO="ac3"

      ../v1080/index.m3u8
      #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=50000,URI="v360/iframes.m3u8"
      #EXT-X-STREAM-INF:CODECS="avc1.4d401e"
      https://other.example.org/v/unknown.m3u8
      #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",URI="subs/en.m3u8"
      """
    guard case .master(let variants) = try HLSPlaylist.parse(text, playlistURL: base) else {
      Issue.record("not a master playlist")
      return
    }
    let root = "https://cdn.example.com"
    #expect(
      variants == [
        HLSPlaylist.Variant(
          uri: URL(string: "\(root)/videos/show/v360/index.m3u8")!, bandwidth: 800_000, resolution: "640x360",
          codecs: "avc1.4d401e,mp4a.40.2",
          audioRenditions: [
            URL(string: "\(root)/videos/show/audio/en.m3u8")!,
            URL(string: "\(root)/videos/show/audio/de.m3u8")!,
          ],
          subtitleRenditions: [URL(string: "\(root)/videos/show/subs/en.m3u8")!],
          defaultAudio: URL(string: "\(root)/videos/show/audio/en.m3u8")!),
        HLSPlaylist.Variant(
          uri: URL(string: "\(root)/videos/v1080/index.m3u8")!, bandwidth: 5_000_000, resolution: "1920x1080",
          codecs: "avc1.640028,ac-3", audioRenditions: [URL(string: "\(root)/ac3/en.m3u8")!],
          defaultAudio: URL(string: "\(root)/ac3/en.m3u8")!),
        HLSPlaylist.Variant(
          uri: URL(string: "https://other.example.org/v/unknown.m3u8")!, codecs: "avc1.4d401e"),
      ])
  }

  /// A group whose `DEFAULT=YES` rendition has no URI plays the variant's own audio: no default to fetch,
  /// though the group's other renditions are listed.
  @Test func aDefaultRenditionWithoutAURIMeansTheVariantsOwnAudio() throws {
    let text = """
      #EXTM3U
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="fr",URI="fr.m3u8"
      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="main",DEFAULT=YES
      #EXT-X-STREAM-INF:BANDWIDTH=1000,AUDIO="a"
      v.m3u8
      """
    guard case .master(let variants) = try HLSPlaylist.parse(text, playlistURL: base) else {
      Issue.record("not a master playlist")
      return
    }
    #expect(
      variants.map(\.audioRenditions) == [[URL(string: "https://cdn.example.com/videos/show/fr.m3u8")!]])
    #expect(variants.map(\.defaultAudio) == [nil])
  }

  @Test func mediaPlaylistSegmentsKeysMapsInFetchOrder() throws {
    let text = """
      #EXTM3U
      #EXT-X-VERSION:7
      #EXT-X-TARGETDURATION:10
      #EXT-X-MEDIA-SEQUENCE:0
      #EXT-X-MAP:URI="init-a.mp4"
      #EXT-X-KEY:METHOD=AES-128,URI="keys/k1.bin",IV=0x00000000000000000000000000000001
      #EXTINF:9.009,
      s0.m4s
      #EXTINF:9.009,
      /abs/s1.m4s
      #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://drm/asset",KEYFORMAT="com.apple.streamingkeydelivery"
      #EXT-X-KEY:METHOD=AES-128,URI="keys/k2.bin"
      #EXTINF:9.009,
      ../up/s2.m4s
      #EXT-X-MAP:URI="init-a.mp4"
      #EXT-X-KEY:METHOD=AES-128,URI="keys/k1.bin"
      #EXT-X-BYTERANGE:1000@0
      #EXTINF:3,
      https://cdn2.example.com/s3.m4s
      #EXT-X-BYTERANGE:1000@1000
      #EXTINF:3,
      https://cdn2.example.com/s3.m4s
      #EXT-X-MAP:URI="init-b.mp4"
      #EXT-X-ENDLIST
      """
    guard case .media(let playlist) = try HLSPlaylist.parse(text, playlistURL: base) else {
      Issue.record("not a media playlist")
      return
    }
    let show = "https://cdn.example.com/videos/show"
    func url(_ text: String) -> URL { URL(string: text)! }
    #expect(
      playlist.segments == [
        url("\(show)/s0.m4s"), url("https://cdn.example.com/abs/s1.m4s"),
        url("https://cdn.example.com/videos/up/s2.m4s"), url("https://cdn2.example.com/s3.m4s"),
        url("https://cdn2.example.com/s3.m4s"),
      ])
    #expect(playlist.keys == [url("\(show)/keys/k1.bin"), url("\(show)/keys/k2.bin")])
    #expect(playlist.maps == [url("\(show)/init-a.mp4"), url("\(show)/init-b.mp4")])
    #expect(playlist.targetDuration == 10)
    #expect(playlist.isEndList)
    #expect(
      playlist.allURIs == [
        url("\(show)/init-a.mp4"), url("\(show)/keys/k1.bin"), url("\(show)/s0.m4s"),
        url("https://cdn.example.com/abs/s1.m4s"), url("\(show)/keys/k2.bin"),
        url("https://cdn.example.com/videos/up/s2.m4s"), url("https://cdn2.example.com/s3.m4s"),
        url("\(show)/init-b.mp4"),
      ])
    #expect(playlist.segmentDurations == [9.009, 9.009, 9.009, 3, 3])
    // What a preload of the first seconds fetches: the segments starting before the time plus 0.75 s (at least
    // the first), with the keys and maps they need, and no key or map listed after them.
    #expect(
      playlist.startURIs(seconds: 0) == [
        url("\(show)/init-a.mp4"), url("\(show)/keys/k1.bin"), url("\(show)/s0.m4s"),
      ])
    #expect(playlist.startURIs(seconds: 8.2) == playlist.startURIs(seconds: 0))
    #expect(
      playlist.startURIs(seconds: 8.3) == [
        url("\(show)/init-a.mp4"), url("\(show)/keys/k1.bin"), url("\(show)/s0.m4s"),
        url("https://cdn.example.com/abs/s1.m4s"),
      ])
    #expect(playlist.startURIs(seconds: 1000) == Array(playlist.allURIs.dropLast()))
  }

  /// URIs that differ only in the scheme's case or in dot segments name one resource (RFC 3986 §6.2.2): listed
  /// once in `allURIs` (so `fetch --hls` fetches it once) and among the keys. Found by the `hls` fuzzer: the
  /// rewritten playlist, whose path-form URIs are the same for both, listed one URI fewer.
  @Test func urisNamingOneResourceAreListedOnce() throws {
    let text = """
      #EXTM3U
      #EXT-X-TARGETDURATION:10
      #EXT-X-KEY:METHOD=AES-128,URI="https://cdn.example.com/k.bin"
      #EXTINF:10,
      htTps://cdn.example.com/a/s0.ts
      #EXT-X-KEY:METHOD=AES-128,URI="HTTPS://cdn.example.com/x/../k.bin"
      #EXTINF:10,
      https://cdn.example.com/a/s0.ts
      #EXTINF:10,
      https://cdn.example.com/a/./s1.ts
      #EXT-X-ENDLIST
      """
    guard case .media(let playlist) = try HLSPlaylist.parse(text, playlistURL: base) else {
      Issue.record("not a media playlist")
      return
    }
    #expect(playlist.segments.count == 3)
    #expect(playlist.keys.map(\.absoluteString) == ["https://cdn.example.com/k.bin"])
    #expect(
      playlist.allURIs.map(\.absoluteString) == [
        "https://cdn.example.com/k.bin", "htTps://cdn.example.com/a/s0.ts",
        "https://cdn.example.com/a/./s1.ts",
      ])
  }

  @Test func liveMediaPlaylistWithoutEndList() throws {
    let text = "#EXTM3U\r\n#EXT-X-TARGETDURATION:4\r\n#EXTINF:4.0,\r\nlive/1.ts\r\n"
    let parsed = try HLSPlaylist.parse(text, playlistURL: URL(string: "http://h:81/a/b.m3u8")!)
    guard case .media(let playlist) = parsed else {
      Issue.record("\(parsed)")
      return
    }
    #expect(!playlist.isEndList)
    #expect(playlist.segments == [URL(string: "http://h:81/a/live/1.ts")!])
    #expect(playlist.allURIs == playlist.segments)
  }

  @Test func attributeListsFollowRFC8216() throws {
    let list = try HLSPlaylist.parseAttributeList(
      #"BANDWIDTH=1,CODECS="a,b,c",RESOLUTION=1x2, NAME="x=y",EMPTY="""#)
    #expect(list.map(\.name) == ["BANDWIDTH", "CODECS", "RESOLUTION", "NAME", "EMPTY"])
    #expect(list.map(\.value) == ["1", "a,b,c", "1x2", "x=y", ""])
    #expect(list.map(\.isQuoted) == [false, true, false, true, true])
    #expect(try HLSPlaylist.parseAttributeList("").isEmpty)
    for bad in [#"A="x"#, "A", "=1", "A=1,A=2", "A=,B=1", #"A="x"B=1"#, "A=1,,B=2", "A B=1"] {
      #expect(throws: HLSPlaylist.AttributeListError.self, "\(bad)") {
        _ = try HLSPlaylist.parseAttributeList(bad[...])
      }
    }
  }

  /// An attribute list is checked for repeated names in linear time: the proxy rewrites whatever an origin
  /// sends, up to 8 MiB, so one long `EXT-X-KEY` line must not cost it quadratic work. (Comparing each name with
  /// every earlier one took 4 s for 8,000 attributes in a debug build; 8 MiB of them would take hours.)
  @Test func longAttributeListsAreCheckedInLinearTime() throws {
    let attributes = (0..<10_000).map { "A\($0)=1" }.joined(separator: ",")
    let text = "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k.bin\"," + attributes + "\n#EXTINF:1,\ns.ts\n"
    var rewritten = ""
    let spent = try threadCPUTime {
      rewritten = try HLSPlaylist.rewrite(text, playlistURL: base, transform: marked)
    }
    #expect(rewritten.contains(#"URI="P(https://cdn.example.com/videos/show/k.bin)",A0=1,A1=1,"#))
    #expect(spent < .seconds(1), "a 10,000-attribute line took \(spent) of CPU")
    #expect(throws: HLSPlaylist.AttributeListError.self) {
      _ = try HLSPlaylist.parseAttributeList((attributes + ",A7=2")[...])
    }
  }

  // MARK: Errors

  @Test func malformedInputsGiveTypedErrorsWithLineNumbers() {
    let url = base.absoluteString
    func error(_ text: String) -> HLSError? {
      do {
        _ = try HLSPlaylist.parse(text, playlistURL: base)
        return nil
      } catch {
        return error
      }
    }
    #expect(error("<html>\n") == .notAPlaylist(url: url, firstLine: "<html>"))
    #expect(error("") == .notAPlaylist(url: url, firstLine: ""))
    #expect(error("\n#EXTM3U\n") == .notAPlaylist(url: url, firstLine: ""))
    guard
      case .malformedLine(3, let reason) = error("#EXTM3U\n\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\n")?.kind
    else {
      Issue.record("unterminated quote")
      return
    }
    #expect(reason.contains("closing"))
    #expect(
      error("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n")
        == .malformedLine(url: url, line: 2, reason: "#EXT-X-STREAM-INF is not followed by a URI line"))
    #expect(
      error("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n#EXT-X-STREAM-INF:BANDWIDTH=2\nv.m3u8\n")
        == .malformedLine(
          url: url, line: 3,
          reason: "#EXT-X-STREAM-INF follows the one on line 2 without a URI line between"))
    #expect(
      error("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=fast\nv.m3u8\n")
        == .malformedLine(url: url, line: 2, reason: "BANDWIDTH fast is not a decimal integer"))
    #expect(
      error("#EXTM3U\nstray.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n")
        == .malformedLine(url: url, line: 2, reason: "URI line without a #EXT-X-STREAM-INF before it"))
    #expect(
      error("#EXTM3U\n#EXTINF:abc,\ns.ts\n")
        == .malformedLine(url: url, line: 2, reason: "#EXTINF duration 'abc' is not a decimal number"))
    #expect(
      error("#EXTM3U\n#EXT-X-TARGETDURATION:6.5\n")
        == .malformedLine(url: url, line: 2, reason: "#EXT-X-TARGETDURATION '6.5' is not a decimal integer"))
    #expect(
      error("#EXTM3U\n#EXT-X-KEY:URI=\"k\"\n")
        == .malformedLine(url: url, line: 2, reason: "#EXT-X-KEY has no METHOD"))
    #expect(
      error("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128\n")
        == .malformedLine(url: url, line: 2, reason: "#EXT-X-KEY with METHOD=AES-128 has no URI"))
    #expect(
      error("#EXTM3U\n#EXT-X-MAP:BYTERANGE=\"1@0\"\n")
        == .malformedLine(url: url, line: 2, reason: "#EXT-X-MAP has no URI"))
    #expect(
      error("#EXTM3U\n#EXTINF:1,\nhttp://a b/c.ts\n")
        == .unresolvableURI(url: url, line: 3, uri: "http://a b/c.ts"))
    #expect(
      error("#EXTM3U\n#EXTINF:1,\nhttp://[::1/c.ts\n")
        == .unresolvableURI(url: url, line: 3, uri: "http://[::1/c.ts"))
    #expect(
      error("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n#EXTINF:1,\ns.ts\n")
        == .malformedLine(
          url: url, line: 4,
          reason: "#EXTINF is a media playlist tag, but this is a master playlist (it has #EXT-X-STREAM-INF)")
    )
    let huge =
      "#EXTM3U\n" + String(repeating: "#EXTINF:1,\ns.ts\n", count: HLSPlaylist.maxPlaylistBytes / 16 + 1)
    #expect(error(huge) == .tooLarge(url: url, bytes: huge.utf8.count, limit: HLSPlaylist.maxPlaylistBytes))
  }

  @Test func rewriteErrorsNameTheLine() {
    #expect(throws: HLSError.notAPlaylist(url: base.absoluteString, firstLine: "#EXTINF:1,")) {
      _ = try HLSPlaylist.rewrite("#EXTINF:1,\ns.ts\n", playlistURL: self.base, transform: self.marked)
    }
    #expect(
      throws: HLSError.malformedLine(url: base.absoluteString, line: 2, reason: "URI is not a quoted string")
    ) {
      _ = try HLSPlaylist.rewrite(
        "#EXTM3U\n#EXT-X-MAP:URI=init.mp4\n", playlistURL: self.base, transform: self.marked)
    }
    #expect(throws: HLSError.unresolvableURI(url: base.absoluteString, line: 3, uri: "http://a b/")) {
      _ = try HLSPlaylist.rewrite(
        "#EXTM3U\n#EXTINF:1,\nhttp://a b/\n", playlistURL: self.base, transform: self.marked)
    }
    let description = HLSError.malformedLine(url: "http://h/p.m3u8", line: 7, reason: "oops").description
    #expect(description == "http://h/p.m3u8 line 7: oops")
  }

  // MARK: Rewrite, then parse

  /// Random media playlists (seeded): rewriting with a transform that returns the absolute URL, then parsing,
  /// gives the same segments, keys and maps as parsing the original; so does a proxy-style transform after
  /// undoing it.
  @Test func rewriteThenParseKeepsTheSegments() throws {
    var random = SeededRandom(seed: 0x5EED)
    let forms = [
      "seg%d.ts", "/root/seg%d.ts", "../up/seg%d.ts", "https://other.example.com/x/seg%d.ts",
      "sub/dir/seg%d.ts?v=2", "./seg%d.ts", "//cdn3.example.com/seg%d.ts",
    ]
    let proxy = "http://127.0.0.1:9999/p?u="
    func proxied(_ url: URL) -> String {
      proxy + url.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }
    func unproxied(_ url: URL) -> URL {
      let text = url.absoluteString
      guard text.hasPrefix(proxy) else { return url }
      return URL(string: String(text.dropFirst(proxy.count)).removingPercentEncoding!)!
    }
    for round in 0..<200 {
      let newline = Bool.random(using: &random) ? "\r\n" : "\n"
      var lines = ["#EXTM3U", "#EXT-X-TARGETDURATION:\(Int.random(in: 1...10, using: &random))"]
      for index in 0..<Int.random(in: 0...30, using: &random) {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: lines.append(#"#EXT-X-KEY:METHOD=AES-128,URI="keys/k\#(index).bin",IV=0x1"#)
        case 1: lines.append(#"#EXT-X-MAP:URI="/init\#(index % 3).mp4",BYTERANGE="10@0""#)
        case 2: lines.append(#"#EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://k\#(index)",KEYFORMAT="x,y""#)
        case 3: lines.append("")
        case 4: lines.append("# comment \(index)")
        default: break
        }
        lines.append("#EXTINF:\(Double(Int.random(in: 1...100, using: &random)) / 10),t\(index)")
        lines.append(String(format: forms[Int.random(in: 0..<forms.count, using: &random)], index))
      }
      if Bool.random(using: &random) { lines.append("#EXT-X-ENDLIST") }
      let text = lines.joined(separator: newline) + (Bool.random(using: &random) ? newline : "")

      guard case .media(let original) = try HLSPlaylist.parse(text, playlistURL: base) else {
        Issue.record("round \(round): not media")
        return
      }
      let absolute = try HLSPlaylist.rewrite(text, playlistURL: base, transform: { $0.absoluteString })
      guard case .media(let reparsed) = try HLSPlaylist.parse(absolute, playlistURL: base) else {
        Issue.record("round \(round): rewritten is not media")
        return
      }
      #expect(reparsed == original, "round \(round)")
      #expect(absolute.components(separatedBy: newline).count == text.components(separatedBy: newline).count)

      let viaProxy = try HLSPlaylist.rewrite(text, playlistURL: base, transform: proxied)
      guard case .media(let proxiedList) = try HLSPlaylist.parse(viaProxy, playlistURL: base) else {
        Issue.record("round \(round): proxied is not media")
        return
      }
      #expect(proxiedList.segments.allSatisfy { $0.absoluteString.hasPrefix(proxy) })
      #expect(proxiedList.segments.map(unproxied) == original.segments, "round \(round)")
      #expect(proxiedList.allURIs.map(unproxied) == original.allURIs, "round \(round)")
      #expect(viaProxy.contains("skd://") == text.contains("skd://"))
    }
  }
}
