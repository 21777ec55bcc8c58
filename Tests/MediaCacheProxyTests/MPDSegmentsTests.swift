import Foundation
import Testing

@testable import MediaCacheProxy
@testable import MediaCacheStreaming

/// Segment enumeration of hand-written MPDs, one addressing mode at a time.
@Suite struct MPDSegmentsTests {
  let mpdURL = URL(string: "https://cdn.example.com/videos/show/manifest.mpd?token=abc")!

  /// An MPD document around `body` (Periods), with `attributes` on the root.
  func mpd(_ body: String, attributes: String = #"type="static" mediaPresentationDuration="PT4S""#) -> Data {
    Data(
      """
      <?xml version="1.0" encoding="utf-8"?>
      <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" \(attributes)>
      \(body)
      </MPD>
      """.utf8)
  }

  func parse(_ data: Data) throws -> MPDSegments.Presentation { try MPDSegments.parse(data, url: mpdURL) }

  /// The segment URLs (with `#first-last` for a byte range) of every representation, in order.
  func urls(_ presentation: MPDSegments.Presentation, limit: Int = 1000) throws -> [[String]] {
    try presentation.periods.flatMap(\.adaptationSets).flatMap(\.representations).map { representation in
      try representation.segments(limit: limit).map { segment in
        segment.url.absoluteString + (segment.byteRange.map { "#\($0.lowerBound)-\($0.upperBound)" } ?? "")
      }
    }
  }

  func error(_ body: () throws -> Any) -> MPDError? {
    do {
      _ = try body()
      return nil
    } catch let error as MPDError {
      return error
    } catch {
      Issue.record("not an MPDError: \(error)")
      return nil
    }
  }

  @Test func numberTemplateWithDurationWidthsAndIdentifiers() throws {
    let presentation = try parse(
      mpd(
        """
        <Period id="p0">
          <AdaptationSet contentType="video" mimeType="video/mp4">
            <SegmentTemplate timescale="1000" duration="1000" startNumber="7"
              initialization="init-$RepresentationID$.mp4" media="$RepresentationID$/$Bandwidth$/seg-$Number%05d$.m4s?x=$$" />
            <Representation id="hd" bandwidth="3000000" width="1280" height="720" />
            <Representation id="sd" bandwidth="800000">
              <SegmentTemplate startNumber="0" media="sd/$Number$.m4s" />
            </Representation>
          </AdaptationSet>
        </Period>
        """, attributes: #"type="static" mediaPresentationDuration="PT3.5S""#))
    let set = try #require(presentation.periods.first?.adaptationSets.first)
    #expect(set.contentType == "video")
    #expect(set.representations.map(\.id) == ["hd", "sd"])
    #expect(set.representations[0].width == 1280 && set.representations[0].bandwidth == 3_000_000)
    let base = "https://cdn.example.com/videos/show/"
    // 3.5 s of 1 s segments: 4, numbered from startNumber; $$ is a dollar sign.
    #expect(
      try urls(presentation) == [
        ["\(base)init-hd.mp4"]
          + (7...10).map { "\(base)hd/3000000/seg-000\($0 < 10 ? "0" : "")\($0).m4s?x=$" },
        // The representation's template overrides media and startNumber and inherits the rest.
        ["\(base)init-sd.mp4", "\(base)sd/0.m4s", "\(base)sd/1.m4s", "\(base)sd/2.m4s", "\(base)sd/3.m4s"],
      ])
    let kinds = try set.representations[0].segments().map(\.kind)
    #expect(kinds == [.initialization, .media, .media, .media, .media])
  }

  @Test func timelineWithRepeatsAndTime() throws {
    let presentation = try parse(
      mpd(
        """
        <Period duration="PT10S">
          <AdaptationSet>
            <Representation id="a" bandwidth="64000">
              <SegmentTemplate timescale="10" media="t-$Time$-n$Number$.m4s" initialization="a.init" startNumber="5">
                <SegmentTimeline>
                  <S t="100" d="20" r="2" />
                  <S d="15" />
                  <S t="200" d="10" r="1" />
                </SegmentTimeline>
              </SegmentTemplate>
            </Representation>
          </AdaptationSet>
        </Period>
        """))
    let names = try urls(presentation)[0].map { $0.split(separator: "/").last.map(String.init) ?? "" }
    #expect(
      names == [
        "a.init", "t-100-n5.m4s", "t-120-n6.m4s", "t-140-n7.m4s", "t-160-n8.m4s", "t-200-n9.m4s",
        "t-210-n10.m4s",
      ])
  }

  @Test func repeatToTheEndIsBoundedByTheNextTimeOrThePeriod() throws {
    // r=-1 up to the next S@t; the last one up to the end of the period (PT10S at timescale 1000, with a
    // presentationTimeOffset the timeline starts at).
    let presentation = try parse(
      mpd(
        """
        <Period start="PT0S" duration="PT10S">
          <AdaptationSet>
            <SegmentTemplate timescale="1000" presentationTimeOffset="5000" media="$Time$.m4s">
              <SegmentTimeline>
                <S t="5000" d="1000" r="-1" />
                <S t="8000" d="3000" r="-1" />
              </SegmentTimeline>
            </SegmentTemplate>
            <Representation id="v" />
          </AdaptationSet>
        </Period>
        """))
    let names = try urls(presentation)[0].map { $0.split(separator: "/").last.map(String.init) ?? "" }
    // 5000..<8000 in 1000s, then 8000..<15000 in 3000s: 8000, 11000, 14000 (the last one ends past 15000).
    #expect(names == ["5000.m4s", "6000.m4s", "7000.m4s", "8000.m4s", "11000.m4s", "14000.m4s"])

    // Without any end, r=-1 is an error that says why.
    let unbounded = try parse(
      mpd(
        """
        <Period><AdaptationSet><Representation id="v">
          <SegmentTemplate media="$Number$.m4s"><SegmentTimeline><S d="1" r="-1"/></SegmentTimeline></SegmentTemplate>
        </Representation></AdaptationSet></Period>
        """, attributes: #"type="static""#))
    let failure = error { try urls(unbounded) }
    guard case .invalid(let at, let reason) = failure?.kind else {
      Issue.record("\(String(describing: failure))")
      return
    }
    #expect(at == "Period 0 > AdaptationSet 0 > Representation 'v'")
    #expect(reason.contains("S@r=-1"), "\(reason)")
  }

  @Test func segmentListWithRangesAndInitialization() throws {
    let presentation = try parse(
      mpd(
        """
        <Period>
          <BaseURL>media/</BaseURL>
          <AdaptationSet>
            <Representation id="1" bandwidth="1">
              <BaseURL>one.mp4</BaseURL>
              <SegmentList duration="2">
                <Initialization range="0-799" />
                <SegmentURL mediaRange="800-1999" />
                <SegmentURL mediaRange="2000-2999" />
              </SegmentList>
            </Representation>
            <Representation id="2" bandwidth="2">
              <SegmentList>
                <Initialization sourceURL="two/init.mp4" />
                <SegmentURL media="two/s1.m4s" />
                <SegmentURL media="https://other.example.net/two/s2.m4s" />
              </SegmentList>
            </Representation>
          </AdaptationSet>
        </Period>
        """))
    let base = "https://cdn.example.com/videos/show/media/"
    #expect(
      try urls(presentation) == [
        ["\(base)one.mp4#0-799", "\(base)one.mp4#800-1999", "\(base)one.mp4#2000-2999"],
        ["\(base)two/init.mp4", "\(base)two/s1.m4s", "https://other.example.net/two/s2.m4s"],
      ])
  }

  @Test func segmentBaseIsOneFileWithItsRanges() throws {
    let presentation = try parse(
      mpd(
        """
        <Period>
          <AdaptationSet mimeType="audio/mp4">
            <Representation id="audio" bandwidth="128000">
              <BaseURL>audio.mp4</BaseURL>
              <SegmentBase indexRange="900-1099"><Initialization range="0-899" /></SegmentBase>
            </Representation>
            <Representation id="plain"><BaseURL>plain.mp4</BaseURL></Representation>
          </AdaptationSet>
        </Period>
        """))
    let set = try #require(presentation.periods.first?.adaptationSets.first)
    #expect(set.contentType == "audio")
    let audio = try set.representations[0].segments()
    let url = URL(string: "https://cdn.example.com/videos/show/audio.mp4")!
    #expect(
      audio == [
        .init(kind: .initialization, url: url, byteRange: 0...899),
        .init(kind: .index, url: url, byteRange: 900...1099),
        .init(kind: .media, url: url, byteRange: nil),
      ])
    // No addressing at all: the BaseURL is the one media segment.
    #expect(try urls(presentation)[1] == ["https://cdn.example.com/videos/show/plain.mp4"])
  }

  @Test func baseURLChainsResolveByRFC3986() throws {
    let presentation = try parse(
      mpd(
        """
        <BaseURL>https://cdn2.example.com/root/x/</BaseURL>
        <Period duration="PT2S">
          <BaseURL>../period/</BaseURL>
          <AdaptationSet>
            <BaseURL>set/</BaseURL>
            <Representation id="r"><BaseURL>rep/</BaseURL>
              <SegmentTemplate media="/abs/$Number$.m4s" initialization="../i.mp4" duration="2" />
            </Representation>
            <Representation id="q"><BaseURL>//cdn3.example.org/q/</BaseURL>
              <SegmentTemplate media="s$Number$.m4s?a=b" duration="4" />
            </Representation>
          </AdaptationSet>
        </Period>
        <Period duration="PT1S"><AdaptationSet><Representation id="z">
          <SegmentTemplate media="z$Number$" duration="1" />
        </Representation></AdaptationSet></Period>
        """))
    // Period 1 starts where period 0 ends; the MPD's BaseURL applies to both.
    #expect(presentation.periods.map(\.start) == [0, 2])
    #expect(
      try urls(presentation) == [
        ["https://cdn2.example.com/root/period/set/i.mp4", "https://cdn2.example.com/abs/1.m4s"],
        ["https://cdn3.example.org/q/s1.m4s?a=b"], ["https://cdn2.example.com/root/x/z1"],
      ])
  }

  @Test func limitsAreTypedErrorsBeforeAnythingLarge() throws {
    // A billion segments from one S element: refused at once, not enumerated.
    let huge = try parse(
      mpd(
        """
        <Period><AdaptationSet><Representation id="v"><SegmentTemplate media="$Number$">
          <SegmentTimeline><S t="0" d="1" r="999999999999" /></SegmentTimeline>
        </SegmentTemplate></Representation></AdaptationSet></Period>
        """))
    let failure = error { try urls(huge, limit: 100_000) }
    #expect(
      failure
        == .tooManySegments(
          url: mpdURL.absoluteString, at: "Period 0 > AdaptationSet 0 > Representation 'v'", limit: 100_000))
    #expect(failure?.description.contains("more than 100000 segments") == true)

    // A year of 1 ms segments from a duration template.
    let long = try parse(
      mpd(
        #"<Period><AdaptationSet><Representation id="v"><SegmentTemplate media="$Number$" timescale="1000" duration="1"/></Representation></AdaptationSet></Period>"#,
        attributes: #"type="static" mediaPresentationDuration="P1Y""#))
    #expect(
      error { try urls(long, limit: 10) }.map { $0.code == .tooManySegments }
        == true)
    // Just at the limit is fine.
    #expect(
      try urls(
        parse(
          mpd(
            #"<Period><AdaptationSet><Representation id="v"><SegmentTemplate media="$Number$" duration="1"/></Representation></AdaptationSet></Period>"#
          )), limit: 4)[0].count == 4)

    // An MPD over 8 MiB is refused without parsing.
    let big = Data(count: MPDSegments.maxManifestBytes + 1)
    #expect(
      error { try parse(big) }
        == .tooLarge(url: mpdURL.absoluteString, bytes: MPDSegments.maxManifestBytes + 1, limit: 8 << 20))
  }

  @Test func malformedAndUnsupportedInputIsATypedError() throws {
    let source = mpdURL.absoluteString
    guard
      let malformed = error({ try parse(Data("<MPD>\n<Period>\n</MPD>".utf8)) }),
      case .malformed(let line, let column, let reason) = malformed.kind
    else {
      Issue.record("malformed XML accepted")
      return
    }
    // libxml2 recovers from a mismatched end tag; the document is refused all the same.
    #expect(malformed.url == source && line == 3 && column != nil)
    #expect(reason == "end tag does not match the start tag")
    #expect(error { try parse(Data("not xml at all".utf8)) }.map { $0.code == .malformed } == true)
    #expect(error { try parse(Data("<html><body/></html>".utf8)) } == .notAnMPD(url: source, root: "html"))
    let laughs = """
      <?xml version="1.0"?><!DOCTYPE MPD [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>
      <MPD><BaseURL>&b;</BaseURL></MPD>
      """
    #expect(error { try parse(Data(laughs.utf8)) } == .documentType(url: source))
    #expect(error { try parse(Data()) }.map { $0.code == .malformed } == true)
    // What makes XMLParser trap (found by the MPD fuzzer on the rewriter) is refused before it parses.
    #expect(error { try parse(Data("<MPD><?a?></MPD>".utf8)) } == .processingInstruction(url: source))
    #expect(error { try parse(Data([0x3C, 0x4D, 0x50, 0x44, 0xFF, 0x2F, 0x3E])) } == .notUTF8(url: source))

    let rep = { (template: String) in
      mpd(
        "<Period><AdaptationSet><Representation id=\"v\" bandwidth=\"5\">\(template)</Representation></AdaptationSet></Period>"
      )
    }
    let cases: [(String, String)] = [
      (#"<SegmentTemplate media="$Number" duration="1"/>"#, "is not closed"),
      (#"<SegmentTemplate media="$Nmber$" duration="1"/>"#, "unknown identifier $Nmber$"),
      (#"<SegmentTemplate media="$RepresentationID%02d$" duration="1"/>"#, "takes no format tag"),
      (#"<SegmentTemplate media="$Number%5d$" duration="1"/>"#, "is not %0<width>d"),
      (#"<SegmentTemplate media="$Number%0999d$" duration="1"/>"#, "is not %0<width>d"),
      (#"<SegmentTemplate media="$Number$" initialization="i$Number$" duration="1"/>"#, "has no value here"),
      (#"<SegmentTemplate media="$Number$"/>"#, "neither a SegmentTimeline nor a positive duration"),
      (#"<SegmentTemplate duration="1"/>"#, "no media attribute"),
      (#"<SegmentTemplate media="$Number$" timescale="0" duration="1"/>"#, "timescale must be positive"),
      (
        #"<SegmentTemplate media="$Number$" duration="x"/>"#,
        "SegmentTemplate@duration 'x' is not a non-negative"
      ),
      (
        #"<SegmentTemplate media="$Number$"><SegmentTimeline><S t="0"/></SegmentTimeline></SegmentTemplate>"#,
        "has no d"
      ),
      (
        #"<SegmentTemplate media="$Number$"><SegmentTimeline><S d="0"/></SegmentTimeline></SegmentTemplate>"#,
        "S@d must be positive"
      ),
      (
        #"<SegmentTemplate media="$Number$"><SegmentTimeline><S d="1" r="-2"/></SegmentTimeline></SegmentTemplate>"#,
        "S@r must be -1 or more"
      ),
      (#"<SegmentList><SegmentURL media="a" mediaRange="9-1"/></SegmentList>"#, "is not a byte range"),
      (#"<BaseURL>http://</BaseURL>"#, "cannot be resolved"),
    ]
    for (template, expected) in cases {
      let failure = error { try urls(try parse(rep(template))) }
      #expect(failure?.description.contains(expected) == true, "\(template): \(String(describing: failure))")
      #expect(failure?.description.hasPrefix(source) == true, "\(template)")
    }
    let subNumber = error {
      try urls(try parse(rep(#"<SegmentTemplate media="$SubNumber$" duration="1"/>"#)))
    }
    #expect(subNumber?.description.contains("$SubNumber$ in SegmentTemplate@media is not supported") == true)
    let noID = error { try parse(mpd("<Period><AdaptationSet><Representation/></AdaptationSet></Period>")) }
    #expect(
      noID == .invalid(url: source, at: "Period 0 > AdaptationSet 0", reason: "a Representation has no id"))
    let remote = error {
      try parse(mpd(#"<Period xmlns:xlink="http://www.w3.org/1999/xlink" xlink:href="http://x/p"/>"#))
    }
    #expect(remote?.description.contains("a remote Period (xlink:href) is not supported") == true)
    // An element that resolves to zero is no remote one: removed (ISO/IEC 23009-1 5.5.3).
    let zero = #"xmlns:xlink="http://www.w3.org/1999/xlink" xlink:href="urn:mpeg:dash:resolve-to-zero:2013""#
    let removed = try parse(
      mpd(
        #"<Period id="ad" \#(zero)/><Period id="main"><AdaptationSet \#(zero)/><AdaptationSet>"#
          + #"<Representation id="v"><SegmentTemplate media="s$Number$.m4s" duration="2"/></Representation>"#
          + "</AdaptationSet></Period>"))
    #expect(removed.periods.map(\.id) == ["main"])
    #expect(removed.periods.first?.adaptationSets.count == 1)
    let badDuration = error { try parse(mpd("", attributes: #"mediaPresentationDuration="4 seconds""#)) }
    #expect(
      badDuration?.description.contains("MPD@mediaPresentationDuration '4 seconds' is not an xs:duration")
        == true)
  }

  /// Found by the MPD fuzzer: a `BaseURL` whose text spans lines was quoted as it was, so the error's
  /// description (logged, and sent as a refusal's reason) had line breaks in it.
  @Test func errorsQuotingTheDocumentStayOneLine() throws {
    let data = mpd(
      "<BaseURL>http:./cdn.example .com/a\n  b\u{2028}c\t</BaseURL><Period><AdaptationSet>"
        + "<Representation id=\"v\" bandwidth=\"5\"><SegmentBase indexRange=\"8-9\"/></Representation>"
        + "</AdaptationSet></Period>")
    let failure = error { try parse(data) }
    let text = try #require(failure?.description)
    #expect(text.contains("cannot be resolved"), "\(text)")
    #expect(
      !text.unicodeScalars.contains { $0.properties.generalCategory == .control }, "\(text.debugDescription)")
    #expect(!text.contains("\u{2028}") && !text.contains("\n"), "\(text.debugDescription)")
    #expect(text.contains(#"a\n  b\u{2028}c'"#), "escaped, not dropped (the end trimmed): \(text)")
  }

  @Test func dynamicMPDsAreMarkedAndDurationsParse() throws {
    let live = try parse(mpd("<Period/>", attributes: #"type="dynamic""#))
    #expect(live.isDynamic)
    #expect(try !parse(mpd("<Period/>")).isDynamic)
    #expect(MPDSegments.duration("PT4.0S") == 4)
    #expect(MPDSegments.duration("PT1H2M3.5S") == 3723.5)
    #expect(MPDSegments.duration("P1DT1S") == 86_401)
    for bad in ["", "P", "PT", "4S", "PT4", "P1S", "PT1D", "PT-1S", "PT1.2.3S"] {
      #expect(MPDSegments.duration(bad) == nil, "\(bad)")
    }
  }
}
