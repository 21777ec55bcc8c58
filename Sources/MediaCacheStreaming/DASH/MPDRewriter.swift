import Foundation

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// DASH MPDs (ISO/IEC 23009-1) in the proxy: recognising them and rewriting the URLs in them so every request a
/// player makes from the MPD goes through the proxy.
///
/// The MPD is parsed as XML (FoundationXML), never matched as text. URLs are handled as strings, so template
/// identifiers (`$Number%05d$`, `$Time$`, `$RepresentationID$`, `$Bandwidth$`) and the rest of each URL are
/// kept byte for byte; only the scheme and host move into the path (`http://cdn/v/a.m4s` becomes
/// `/http/cdn/v/a.m4s`).
public enum MPDRewriter {
  /// The largest MPD accepted (8 MiB, like `HLSPlaylist.maxPlaylistBytes`); a longer one is refused.
  public static let maxManifestBytes = 8 << 20

  /// The MPD content type (lowercased, without parameters).
  public static let contentType = "application/dash+xml"

  /// The elements whose text is a URL.
  static let textURLElements: Set<String> = ["BaseURL", "Location", "PatchLocation"]

  /// The URL attributes of each element that has some.
  static let urlAttributes: [String: [String]] = [
    "SegmentTemplate": ["media", "initialization", "index", "bitstreamSwitching"],
    "SegmentURL": ["media", "index"],
    "Initialization": ["sourceURL"],
    "RepresentationIndex": ["sourceURL"],
    "BitstreamSwitching": ["sourceURL"],
  ]

  /// An MPD after rewriting.
  public struct Rewritten: Sendable, Equatable {
    /// The rewritten document, UTF-8 XML.
    public var body: Data
    /// Whether the MPD is live (`type="dynamic"`): it changes, so it must not be served from the cache.
    public var isDynamic: Bool
  }

  /// How the MPD was requested from the proxy, which decides what a relative reference resolves against.
  public enum RequestForm: Sendable {
    /// `/<scheme>/<host>/<path>`: relative references already resolve to proxied URLs and are kept.
    case pathForm
    /// `/<name>?url=...`: relative references would resolve against the proxy's `/name`, so the MPD gets a
    /// top-level `BaseURL` in path form (its top-level relative `BaseURL`s are resolved and written in path
    /// form, or, without one, the path form of the MPD's own URL is added), and relative `Location` and
    /// `PatchLocation` are resolved and written in path form.
    case queryForm
    /// The reverse-proxy mode: a relative path without `..` is kept (it resolves through the request's path);
    /// any other reference is resolved and replaced by `localPath` of its target (the local path of an
    /// upstream URL, nil for a target under no upstream, which is then written absolute). A template whose
    /// identifiers resolving would change is kept as written.
    case reverseProxy(localPath: @Sendable (String) -> String?)
  }

  // MARK: Recognising

  /// Whether a response may be an MPD, so its body must be read to find out: the content type is
  /// `application/dash+xml` (any case, parameters ignored) or the URL's path ends with `.mpd` (any case).
  public static func mayBeManifest(contentType: String?, url: String) -> Bool {
    if hasManifestContentType(contentType) { return true }
    // This runs for every response: without "mpd" (any case) or an escape anywhere, the path cannot end in
    // .mpd, and the URL is not split.
    guard mayNameManifest(url.utf8) else { return false }
    let path = URIReference(url).path.lowercased()
    return path.hasSuffix(".mpd") || path.removingPercentEncoding?.hasSuffix(".mpd") == true
  }

  /// Whether `contentType` is `application/dash+xml` (any case, parameters ignored).
  public static func hasManifestContentType(_ contentType: String?) -> Bool {
    MediaType.of(contentType, isOneOf: CollectionOfOne(Self.contentType))
  }

  /// Whether the URL may name a `.mpd` path: it contains "mpd" in any case, or a `%`.
  private static func mayNameManifest(_ bytes: String.UTF8View) -> Bool {
    var matched = 0
    for byte in bytes {
      if byte == UInt8(ascii: "%") { return true }
      let lower = byte | 0x20
      switch (matched, lower) {
      case (_, UInt8(ascii: "m")): matched = 1
      case (1, UInt8(ascii: "p")): matched = 2
      case (2, UInt8(ascii: "d")): return true
      default: matched = 0
      }
    }
    return false
  }

  // MARK: Rewriting

  /// The MPD with its absolute URLs (and the relative ones that need it, see `ProxyPathForm`) in path form.
  ///
  /// Rewritten are `BaseURL` at every level, `Location`, `PatchLocation`, `SegmentTemplate@media`,
  /// `@initialization`, `@index`, `@bitstreamSwitching`, `SegmentURL@media`, `@index` and the `@sourceURL` of
  /// `Initialization`, `RepresentationIndex` and `BitstreamSwitching`. Each reference is resolved against
  /// the base in effect where it appears (the chain of first `BaseURL`s down from the MPD's URL; `Location`
  /// and `PatchLocation` against the MPD's URL). Comments, processing instructions, whitespace and all other
  /// elements and attributes are kept (the XML serialisation may differ: quoting, empty-element form).
  ///
  /// - Parameters:
  ///   - body: The MPD as the origin sent it.
  ///   - manifestURL: The MPD's origin URL.
  ///   - form: How the MPD was requested from the proxy.
  /// - Throws: `MPDError.tooLarge` over `maxManifestBytes`; `.documentType` for a DTD (MPDs have none, and
  ///   entity expansion is not something a proxy should do for an origin); `.malformed` for XML that does
  ///   not parse; `.notAnMPD` when the root element is not `MPD`.
  public static func rewrite(_ body: Data, manifestURL: String, form: RequestForm) throws(MPDError)
    -> Rewritten
  {
    try MPDInputCheck.screen(body, url: manifestURL, limit: maxManifestBytes)
    let check = XMLCheck(body)
    // A body without an <MPD> root is not an MPD, well-formed or not (the caller may serve it as it is).
    guard check.rootName == "MPD" else { throw .notAnMPD(url: manifestURL, root: check.rootName) }
    if let problem = check.problem {
      throw .malformed(url: manifestURL, line: problem.line, column: problem.column, reason: problem.reason)
    }
    // FoundationXML's XMLDocument is not used: on Linux every document it parses stays in memory (measured:
    // about 22 KB per parse of a 1.7 KB MPD, never freed). The MPD is written back from XMLParser's events.
    let writer = MPDWriter(manifestURL: manifestURL, form: form, rootHasBaseURL: check.rootHasBaseURL)
    let parser = XMLParser(data: body)
    parser.shouldProcessNamespaces = false
    parser.shouldResolveExternalEntities = false
    parser.delegate = writer
    guard parser.parse(), parser.parserError == nil else {
      throw .malformed(
        url: manifestURL, line: parser.lineNumber, column: parser.columnNumber,
        reason: "not well-formed XML on the second pass")
    }
    return Rewritten(body: Data(writer.output.utf8), isDynamic: writer.isDynamic)
  }

}

/// Writes the MPD back from `XMLParser`'s events with its URLs rewritten, carrying the effective base URL
/// (origin side) down the elements: an element's first `BaseURL` child sets the base of what follows it inside
/// that element (the schema puts BaseURL before the elements that use it). Attributes are written in name
/// order (XMLParser gives them unordered); comments and processing instructions inside a URL element are
/// dropped.
private final class MPDWriter: NSObject, XMLParserDelegate {
  let manifestURL: String
  let form: MPDRewriter.RequestForm
  let rootHasBaseURL: Bool
  private(set) var output = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
  private(set) var isDynamic = false

  private struct Frame {
    /// The base of what follows inside the element: its first `BaseURL` child's, else `inherited`.
    var base: String
    /// The base in effect where the element starts, which its `BaseURL` children resolve against: they are
    /// alternatives (DASH 5.6.5), not a chain.
    var inherited: String
    var sawBaseURL = false

    init(base: String) {
      self.base = base
      inherited = base
    }
  }
  /// The text of a URL element being read, written once the element ends.
  private struct URLText {
    var depth: Int
    var text = ""
    var base: String
    var forced: Bool
  }
  private var frames: [Frame] = []
  private var collecting: URLText?
  /// A start tag written without its `>`, so an empty element can be closed as `<a/>`.
  private var openTag = false
  private var rootPrefix = ""
  private var insertedBaseURL = false

  var isQueryForm: Bool {
    if case .queryForm = form { true } else { false }
  }

  /// The text that replaces `reference` (found where `base` applies), or nil to keep it as written; `forced`
  /// writes even a relative reference in path form (the query form's top-level `BaseURL`s and `Location`s).
  func rewritten(_ reference: String, base: String, forced: Bool) -> String? {
    guard case .reverseProxy(let localPath) = form else {
      return forced
        ? ProxyPathForm.forcedReference(reference, base: base)
        : ProxyPathForm.rewrittenReference(reference, base: base)
    }
    let parts = URIReference(reference)
    if parts.scheme == nil, parts.authority == nil, !parts.path.startsWithSlash, !reference.contains("..") {
      return nil
    }
    let target = URIReference.resolve(reference, against: base)
    guard
      !reference.contains("$")
        || ProxyPathForm.templateIdentifiers(target[...]) == ProxyPathForm.templateIdentifiers(reference[...])
    else { return nil }
    return localPath(target) ?? target
  }

  init(manifestURL: String, form: MPDRewriter.RequestForm, rootHasBaseURL: Bool) {
    self.manifestURL = manifestURL
    self.form = form
    self.rootHasBaseURL = rootHasBaseURL
  }

  func parser(
    _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    stopCollecting()
    closeOpenTag()
    let name = localName(elementName)
    let depth = frames.count
    if depth == 0 {
      isDynamic = attributes["type"] == "dynamic"
      if let colon = elementName.firstIndex(of: ":") { rootPrefix = String(elementName[...colon]) }
    }
    if depth == 1, name != "ProgramInformation" { insertBaseURLIfNeeded() }
    let base = frames.last?.base ?? manifestURL
    var attributes = attributes
    for attribute in MPDRewriter.urlAttributes[name] ?? [] {
      if let value = attributes[attribute], let new = rewritten(value, base: base, forced: false) {
        attributes[attribute] = new
      }
    }
    output += "<" + elementName
    for key in attributes.keys.sorted() {
      output += " \(key)=\"\(Self.escaped(attributes[key]!, quote: true))\""
    }
    openTag = true
    frames.append(Frame(base: base))
    if MPDRewriter.textURLElements.contains(name) {
      // Location and PatchLocation resolve against the MPD's own URL, not the BaseURL chain.
      let isLocation = name != "BaseURL"
      collecting = URLText(
        depth: depth + 1, base: isLocation || depth == 0 ? manifestURL : frames[depth - 1].inherited,
        forced: isQueryForm && (isLocation || depth == 1))
    }
  }

  func parser(
    _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?
  ) {
    if let url = collecting, url.depth == frames.count {
      collecting = nil
      let reference = url.text.trimmingCharacters(in: .whitespacesAndNewlines)
      let new = rewritten(reference, base: url.base, forced: url.forced)
      if localName(elementName) == "BaseURL", frames.count >= 2, !frames[frames.count - 2].sawBaseURL {
        frames[frames.count - 2].base = URIReference.resolve(reference, against: url.base)
        frames[frames.count - 2].sawBaseURL = true
      }
      if !url.text.isEmpty || new != nil {
        closeOpenTag()
        output += Self.escaped(new ?? url.text, quote: false)
      }
    }
    frames.removeLast()
    if frames.isEmpty { insertBaseURLIfNeeded() }
    if openTag {
      output += "/>"
      openTag = false
    } else {
      output += "</\(elementName)>"
    }
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) { text(string) }

  func parser(_ parser: XMLParser, foundIgnorableWhitespace whitespaceString: String) {
    text(whitespaceString)
  }

  func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
    let string = String(decoding: CDATABlock, as: UTF8.self)
    if collecting != nil {
      collecting?.text += string
    } else {
      closeOpenTag()
      output += "<![CDATA[\(string)]]>"
    }
  }

  func parser(_ parser: XMLParser, foundComment comment: String) {
    guard collecting == nil else { return }
    closeOpenTag()
    output += "<!--\(comment)-->"
  }

  func parser(_ parser: XMLParser, foundProcessingInstructionWithTarget target: String, data: String?) {
    guard collecting == nil, target.lowercased() != "xml" else { return }
    closeOpenTag()
    output += "<?\(target)\(data.map { " \($0)" } ?? "")?>"
    if frames.isEmpty { output += "\n" }
  }

  private func text(_ string: String) {
    if collecting != nil {
      collecting?.text += string
    } else if !frames.isEmpty {
      closeOpenTag()
      output += Self.escaped(string, quote: false)
    }
  }

  /// An element inside a URL element: the URL is not a plain text one, and is written as it was.
  private func stopCollecting() {
    guard let url = collecting else { return }
    collecting = nil
    closeOpenTag()
    output += Self.escaped(url.text, quote: false)
  }

  private func closeOpenTag() {
    if openTag {
      output += ">"
      openTag = false
    }
  }

  /// In query form, an MPD without a top-level BaseURL gets the path form of its own directory as one,
  /// after any ProgramInformation (the schema's order), so relative references do not resolve against the
  /// proxy's `/name?url=` path.
  private func insertBaseURLIfNeeded() {
    guard isQueryForm, !rootHasBaseURL, !insertedBaseURL,
      let own = ProxyPathForm.forcedReference("./", base: manifestURL)
    else { return }
    insertedBaseURL = true
    closeOpenTag()
    output += "<\(rootPrefix)BaseURL>\(Self.escaped(own, quote: false))</\(rootPrefix)BaseURL>"
    if !frames.isEmpty { frames[0].base = URIReference.resolve(own, against: manifestURL) }
  }

  private func localName(_ qualified: String) -> String {
    qualified.firstIndex(of: ":").map { String(qualified[qualified.index(after: $0)...]) } ?? qualified
  }

  static func escaped(_ text: String, quote: Bool) -> String {
    var result = ""
    result.reserveCapacity(text.utf8.count)
    for scalar in text.unicodeScalars {
      switch scalar {
      case "&": result += "&amp;"
      case "<": result += "&lt;"
      case ">": result += "&gt;"
      case "\"" where quote: result += "&quot;"
      case "\t" where quote: result += "&#9;"
      case "\n" where quote: result += "&#10;"
      case "\r": result += "&#13;"
      default: result.unicodeScalars.append(scalar)
      }
    }
    return result
  }
}
