import Foundation
import Testing

@testable import MediaCacheProxy
@testable import MediaCacheStreaming

#if canImport(FoundationXML)
  import FoundationXML
#endif

@Suite struct MPDRewriterTests {
  let mpdURL = "https://cdn.example.com/v/show/manifest.mpd?token=abc"

  /// The rewritten MPD parsed back, for reading values out of it.
  func rewritten(_ xml: String, form: MPDRewriter.RequestForm = .pathForm) throws -> (XMLElement, Bool) {
    let result = try MPDRewriter.rewrite(Data(xml.utf8), manifestURL: mpdURL, form: form)
    let document = try XMLDocument(data: result.body, options: [])
    return (try #require(document.rootElement()), result.isDynamic)
  }

  /// Elements with local name `name` anywhere under `element`, in document order.
  func all(_ name: String, in element: XMLElement) -> [XMLElement] {
    var found: [XMLElement] = []
    for child in (element.children ?? []).compactMap({ $0 as? XMLElement }) {
      if child.localName == name { found.append(child) }
      found += all(name, in: child)
    }
    return found
  }

  func value(_ attribute: String, of element: XMLElement) -> String? {
    element.attributes?.first { $0.localName == attribute }?.stringValue
  }

  func mpd(_ body: String, type: String = "static") -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="\(type)" profiles="urn:mpeg:dash:profile:isoff-live:2011">
    \(body)
    </MPD>
    """
  }

  // MARK: Recognising

  @Test func contentTypeOrMPDPathMayBeAManifest() {
    #expect(MPDRewriter.mayBeManifest(contentType: "application/dash+xml", url: "https://h/a"))
    #expect(
      MPDRewriter.mayBeManifest(contentType: " Application/DASH+XML ; charset=utf-8", url: "https://h/a"))
    #expect(MPDRewriter.mayBeManifest(contentType: nil, url: "https://h/a/b.MPD?x=1"))
    #expect(MPDRewriter.mayBeManifest(contentType: "text/xml", url: "https://h/a/b%2Empd"))
    #expect(!MPDRewriter.mayBeManifest(contentType: "video/mp4", url: "https://h/a.mp4?f=.mpd"))
    #expect(!MPDRewriter.mayBeManifest(contentType: nil, url: "https://h/mpd/a.m4s"))
  }

  @Test func aBodyWithoutAnMPDRootIsNotAnMPD() {
    for body in ["<html><body/></html>", "", "not xml at all", "\u{0}\u{1}"] {
      #expect(throws: MPDError.notAnMPD(url: mpdURL, root: body.hasPrefix("<html") ? "html" : nil)) {
        try MPDRewriter.rewrite(Data(body.utf8), manifestURL: mpdURL, form: .pathForm)
      }
    }
  }

  // MARK: BaseURL chains

  @Test func absoluteBaseURLsAreRewrittenAtEveryLevelAndRelativeOnesKept() throws {
    let (root, isDynamic) = try rewritten(
      mpd(
        """
        <BaseURL>http://cdn2.example.com:8080/media/</BaseURL>
        <BaseURL serviceLocation="b">https://backup.example.com/media/</BaseURL>
        <Period><BaseURL>period1/</BaseURL>
          <AdaptationSet><BaseURL>//cdn3.example.com/abs/</BaseURL>
            <Representation id="v1"><BaseURL>v1/</BaseURL><SegmentBase indexRange="0-99"/></Representation>
          </AdaptationSet>
          <AdaptationSet><Representation id="a1"><BaseURL>/root/audio/</BaseURL></Representation></AdaptationSet>
        </Period>
        """))
    #expect(!isDynamic)
    let bases = all("BaseURL", in: root).map { $0.stringValue ?? "" }
    #expect(
      bases == [
        "/http/cdn2.example.com:8080/media/", "/https/backup.example.com/media/", "period1/",
        // A network-path reference takes the scheme of its base (the first top-level BaseURL's http).
        "/http/cdn3.example.com/abs/", "v1/",
        // An absolute-path reference is resolved against its base's host.
        "/http/cdn2.example.com:8080/root/audio/",
      ])
    #expect(value("serviceLocation", of: all("BaseURL", in: root)[1]) == "b")
  }

  @Test func relativeReferencesThatClimbAboveTheOriginRootAreResolved() throws {
    let (root, _) = try rewritten(
      mpd(
        """
        <Period><BaseURL>../../../../elsewhere/</BaseURL>
          <AdaptationSet><SegmentTemplate media="../seg-$Number$.m4s" initialization="init.mp4"/></AdaptationSet>
        </Period>
        """))
    // ../../../../ from /v/show/ climbs above the root: at the origin it ends at /elsewhere/, but relative to
    // the proxy's /https/cdn.example.com/v/show/ it would eat the host, so it is written in path form.
    #expect(all("BaseURL", in: root).first?.stringValue == "/https/cdn.example.com/elsewhere/")
    let template = try #require(all("SegmentTemplate", in: root).first)
    // ../ from /elsewhere/ stays under the root: kept.
    #expect(value("media", of: template) == "../seg-$Number$.m4s")
    #expect(value("initialization", of: template) == "init.mp4")
  }

  /// Found by the MPD fuzzer: sibling `BaseURL`s are alternatives (DASH 5.6.5), each resolved against the base
  /// of the level above, but the second was resolved against the first, so an alternative written in path form
  /// named a URL under the first one.
  @Test func siblingBaseURLsAreAlternativesNotAChain() throws {
    // In query form the top-level BaseURLs are written in path form, resolved against the MPD's URL.
    let (root, _) = try rewritten(
      mpd(
        """
        <BaseURL>first/</BaseURL>
        <BaseURL>second/</BaseURL>
        <Period><AdaptationSet><SegmentTemplate media="seg-$Number$.m4s"/></AdaptationSet></Period>
        """), form: .queryForm)
    let bases = all("BaseURL", in: root).compactMap(\.stringValue)
    #expect(
      bases == ["/https/cdn.example.com/v/show/first/", "/https/cdn.example.com/v/show/second/"], "\(bases)")
  }

  // MARK: Segment addressing

  @Test func segmentTemplateWithNumberKeepsTemplateIdentifiers() throws {
    let (root, _) = try rewritten(
      mpd(
        """
        <Period><AdaptationSet>
          <SegmentTemplate timescale="1000" duration="2000" startNumber="1"
            media="https://cdn.example.com/v/$RepresentationID$/$Bandwidth$/seg-$Number%05d$.m4s?a=1&amp;b=$$x"
            initialization="http://other.example.com/init-$RepresentationID$.mp4"
            index="idx/$RepresentationID$.sidx"/>
          <Representation id="720p" bandwidth="3000000"/>
        </AdaptationSet></Period>
        """))
    let template = try #require(all("SegmentTemplate", in: root).first)
    #expect(
      value("media", of: template)
        == "/https/cdn.example.com/v/$RepresentationID$/$Bandwidth$/seg-$Number%05d$.m4s?a=1&b=$$x")
    #expect(value("initialization", of: template) == "/http/other.example.com/init-$RepresentationID$.mp4")
    #expect(value("index", of: template) == "idx/$RepresentationID$.sidx")
    #expect(value("timescale", of: template) == "1000")
  }

  /// A template is substituted before it is resolved: a dot segment whose removal would join text across two
  /// `$` pairs into an identifier that was never there (found by the MPD fuzzer) leaves the template as written,
  /// and a dot segment that changes no identifier is removed as for any URL.
  @Test func dotSegmentsNeverInventATemplateIdentifier() throws {
    let (root, _) = try rewritten(
      mpd(
        """
        <Period><AdaptationSet>
          <SegmentTemplate media="http://cdn.example.com/$RepresentationID$/$://..//cdn.example.com/$Number$.m4s"
            initialization="http://cdn.example.com/a/../$RepresentationID$/init.mp4"/>
          <Representation id="v" bandwidth="1"/>
        </AdaptationSet></Period>
        """))
    let template = try #require(all("SegmentTemplate", in: root).first)
    #expect(
      value("media", of: template)
        == "http://cdn.example.com/$RepresentationID$/$://..//cdn.example.com/$Number$.m4s")
    #expect(value("initialization", of: template) == "/http/cdn.example.com/$RepresentationID$/init.mp4")
  }

  @Test func segmentTemplateWithTimelineKeepsTheTimeline() throws {
    let (root, _) = try rewritten(
      mpd(
        """
        <Period><AdaptationSet><Representation id="v" bandwidth="1">
          <SegmentTemplate media="http://cdn.example.com/t/$Time$.m4s" initialization="init.mp4">
            <SegmentTimeline><S t="0" d="2000" r="3"/><S d="1000"/></SegmentTimeline>
          </SegmentTemplate>
        </Representation></AdaptationSet></Period>
        """, type: "dynamic"))
    let template = try #require(all("SegmentTemplate", in: root).first)
    #expect(value("media", of: template) == "/http/cdn.example.com/t/$Time$.m4s")
    let segments = all("S", in: root)
    #expect(segments.map { value("d", of: $0) } == ["2000", "1000"])
    #expect(value("r", of: segments[0]) == "3")
  }

  @Test func liveMPDsAreReportedDynamic() throws {
    #expect(try rewritten(mpd("<Period/>", type: "dynamic")).1)
    #expect(try !rewritten(mpd("<Period/>", type: "static")).1)
  }

  @Test func segmentListAndSegmentBaseURLsAreRewritten() throws {
    let (root, _) = try rewritten(
      mpd(
        """
        <Period><AdaptationSet><Representation id="v" bandwidth="1">
          <SegmentList duration="2">
            <Initialization sourceURL="http://cdn.example.com/list/init.mp4" range="0-799"/>
            <SegmentURL media="http://cdn.example.com/list/s1.m4s" mediaRange="0-99"/>
            <SegmentURL media="s2.m4s" index="http://cdn.example.com/list/s2.sidx"/>
          </SegmentList>
        </Representation>
        <Representation id="w" bandwidth="2"><BaseURL>https://files.example.com/one.mp4</BaseURL>
          <SegmentBase indexRange="832-1000"><Initialization range="0-831"/>
            <RepresentationIndex sourceURL="https://files.example.com/one.sidx"/></SegmentBase>
        </Representation></AdaptationSet></Period>
        """))
    #expect(
      all("Initialization", in: root).compactMap { value("sourceURL", of: $0) } == [
        "/http/cdn.example.com/list/init.mp4"
      ])
    #expect(all("Initialization", in: root).first.flatMap { value("range", of: $0) } == "0-799")
    let urls = all("SegmentURL", in: root)
    #expect(urls.map { value("media", of: $0) } == ["/http/cdn.example.com/list/s1.m4s", "s2.m4s"])
    #expect(value("mediaRange", of: urls[0]) == "0-99")
    #expect(value("index", of: urls[1]) == "/http/cdn.example.com/list/s2.sidx")
    #expect(all("BaseURL", in: root).map(\.stringValue) == ["/https/files.example.com/one.mp4"])
    #expect(all("SegmentBase", in: root).compactMap { value("indexRange", of: $0) } == ["832-1000"])
    #expect(
      all("RepresentationIndex", in: root).compactMap { value("sourceURL", of: $0) } == [
        "/https/files.example.com/one.sidx"
      ])
  }

  @Test func locationAndPatchLocationAreRewrittenAndOtherSchemesKept() throws {
    let (root, _) = try rewritten(
      mpd(
        """
        <Location>https://live.example.com/next.mpd?t=1</Location>
        <PatchLocation ttl="60">patch.mpp</PatchLocation>
        <BaseURL>data:text/plain,hello</BaseURL>
        <BaseURL>http://user@cdn.example.com/secret/</BaseURL>
        """, type: "dynamic"))
    #expect(all("Location", in: root).first?.stringValue == "/https/live.example.com/next.mpd?t=1")
    #expect(all("PatchLocation", in: root).first?.stringValue == "patch.mpp")
    // No path form exists for these: left as written.
    #expect(
      all("BaseURL", in: root).map(\.stringValue) == [
        "data:text/plain,hello", "http://user@cdn.example.com/secret/",
      ])
  }

  // MARK: Query form

  @Test func queryFormGivesTheMPDAPathFormBase() throws {
    let (root, _) = try rewritten(
      mpd(
        """
        <ProgramInformation><Title>t</Title></ProgramInformation>
        <Location>next.mpd</Location>
        <Period><AdaptationSet><SegmentTemplate media="seg-$Number$.m4s"/></AdaptationSet></Period>
        """), form: .queryForm)
    let children = (root.children ?? []).compactMap { $0 as? XMLElement }
    #expect(children.map(\.localName) == ["ProgramInformation", "BaseURL", "Location", "Period"])
    #expect(children[1].stringValue == "/https/cdn.example.com/v/show/")
    #expect(children[1].uri == "urn:mpeg:dash:schema:mpd:2011")
    #expect(children[2].stringValue == "/https/cdn.example.com/v/show/next.mpd")
    #expect(value("media", of: try #require(all("SegmentTemplate", in: root).first)) == "seg-$Number$.m4s")

    let (withBase, _) = try rewritten(
      mpd("<BaseURL>media/</BaseURL><BaseURL>http://b.example.com/m/</BaseURL>"), form: .queryForm)
    #expect(
      all("BaseURL", in: withBase).map(\.stringValue) == [
        "/https/cdn.example.com/v/show/media/", "/http/b.example.com/m/",
      ])
  }

  // MARK: Refusals

  @Test func malformedXMLIsATypedError() {
    for body in [
      "<MPD><Period></MPD>", "<MPD a='1' a='2'/>", "<MPD>&undefined;</MPD>", "<MPD/><extra/>", "<MPD",
    ] {
      do {
        _ = try MPDRewriter.rewrite(Data(body.utf8), manifestURL: mpdURL, form: .pathForm)
        Issue.record("\(body) was rewritten")
      } catch {
        guard case .malformed(let line, _, let reason) = error.kind else {
          Issue.record("\(body): \(error)")
          continue
        }
        #expect(error.url == mpdURL && line >= 1 && reason.contains("not well-formed"), "\(body): \(error)")
        #expect(!error.description.contains("\n"))
      }
    }
  }

  @Test func bodiesThatAreNotUTF8AreRefused() throws {
    // Found by the mpd fuzzer: FoundationXML's XMLParser traps on an attribute value that is not UTF-8.
    var body = Data(#"<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type=""#.utf8)
    body.append(contentsOf: [0xCE, 0xCF, 0xCD, 0xD3])
    body.append(Data(#""><Period/></MPD>"#.utf8))
    #expect(throws: MPDError.notUTF8(url: mpdURL)) {
      try MPDRewriter.rewrite(body, manifestURL: mpdURL, form: .pathForm)
    }
  }

  @Test func processingInstructionsAreRefusedButTheDeclarationIsNot() throws {
    // Found by the mpd fuzzer: FoundationXML's XMLParser reads a null pointer for `<?a?>`.
    for body in [
      "<MPD><?a?></MPD>", "<?xml version='1.0'?><?x y?><MPD/>", "<?xml-stylesheet href='a'?><MPD/>",
    ] {
      #expect(throws: MPDError.processingInstruction(url: mpdURL), "\(body)") {
        try MPDRewriter.rewrite(Data(body.utf8), manifestURL: mpdURL, form: .pathForm)
      }
    }
    let declared = try MPDRewriter.rewrite(
      Data("\u{FEFF}<?xml version=\"1.0\"?>\n<MPD/>".utf8), manifestURL: mpdURL, form: .pathForm)
    #expect(String(decoding: declared.body, as: UTF8.self).contains("<MPD/>"))
  }

  @Test func documentTypeDeclarationsAreRefused() {
    let body = #"<?xml version="1.0"?><!DOCTYPE MPD [<!ENTITY a "aaaa">]><MPD>&a;</MPD>"#
    #expect(throws: MPDError.documentType(url: mpdURL)) {
      try MPDRewriter.rewrite(Data(body.utf8), manifestURL: mpdURL, form: .pathForm)
    }
  }

  @Test func oversizeMPDsAreRefused() {
    let padding = String(repeating: " ", count: MPDRewriter.maxManifestBytes)
    let body = Data(mpd("<Period/>\(padding)").utf8)
    #expect(throws: MPDError.tooLarge(url: mpdURL, bytes: body.count, limit: MPDRewriter.maxManifestBytes)) {
      try MPDRewriter.rewrite(body, manifestURL: mpdURL, form: .pathForm)
    }
    #expect(MPDError.tooLarge(url: mpdURL, bytes: 9, limit: 8).description.contains("larger than the limit"))
  }
}
