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
    guard let contentType else { return false }
    // Bytes, not Foundation's trimming and lowercasing: this runs for every response.
    let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    let mediaType = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
    let trimmed = mediaType.drop(while: isBlank).reversed().drop(while: isBlank).reversed()
    let expected = Self.contentType.utf8
    guard trimmed.count == expected.count else { return false }
    return zip(trimmed, expected).allSatisfy { (0x41...0x5A).contains($0) ? $0 | 0x20 == $1 : $0 == $1 }
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
    if body.count > maxManifestBytes {
      throw .tooLarge(url: manifestURL, bytes: body.count, limit: maxManifestBytes)
    }
    // Before any parsing: a DTD's entities would be expanded by the parser.
    if body.range(of: Data("<!DOCTYPE".utf8)) != nil { throw .documentType(url: manifestURL) }
    let check = XMLCheck(body)
    // A body without an <MPD> root is not an MPD, well-formed or not (the caller may serve it as it is).
    guard check.rootName == "MPD" else { throw .notAnMPD(url: manifestURL, root: check.rootName) }
    if let problem = check.problem {
      throw .malformed(url: manifestURL, line: problem.line, column: problem.column, reason: problem.reason)
    }
    let document: XMLDocument
    do {
      document = try XMLDocument(data: body, options: [.nodePreserveWhitespace])
    } catch {
      throw .malformed(url: manifestURL, line: 0, column: 0, reason: "\(error)")
    }
    guard let root = document.rootElement() else { throw .notAnMPD(url: manifestURL, root: nil) }
    var walker = Walker(manifestURL: manifestURL, form: form)
    walker.visit(root, base: manifestURL, isRoot: true)
    let isDynamic = attribute("type", of: root)?.stringValue == "dynamic"
    return Rewritten(body: document.xmlData(options: [.nodeCompactEmptyElement]), isDynamic: isDynamic)
  }

  /// The attribute named `name` (no namespace prefix) of `element`.
  static func attribute(_ name: String, of element: XMLElement) -> XMLNode? {
    element.attributes?.first { $0.localName == name || $0.name == name }
  }

  /// Walks the element tree, carrying the effective base URL (origin side) down.
  private struct Walker {
    let manifestURL: String
    let form: RequestForm

    init(manifestURL: String, form: RequestForm) {
      self.manifestURL = manifestURL
      self.form = form
    }

    mutating func visit(_ element: XMLElement, base: String, isRoot: Bool) {
      let children = (element.children ?? []).compactMap { $0 as? XMLElement }
      // The BaseURLs of this element set the base of everything inside it (the first one: a player starts
      // with it; the others are alternatives at the same level).
      var inner = base
      var sawBaseURL = false
      for child in children where name(child) == "BaseURL" {
        let text = (child.stringValue ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if !sawBaseURL { inner = URIReference.resolve(text, against: base) }
        sawBaseURL = true
        let forced = isRoot && form == .queryForm
        if Self.isTextOnly(child), let new = rewritten(text, base: base, forced: forced) {
          child.stringValue = new
        }
      }
      if isRoot, form == .queryForm, !sawBaseURL, let own = ProxyPathForm.forcedReference("./", base: base) {
        // Relative references must not resolve against the proxy's `/name?url=` path: give them the path
        // form of the MPD's own URL as their base (after any ProgramInformation, as the schema orders it).
        // No namespace of its own: written inside the MPD element, it is in the MPD's default namespace.
        let added = XMLElement(name: "BaseURL", stringValue: own)
        let after = children.prefix { name($0) == "ProgramInformation" }.last
        element.insertChild(added, at: after.map { $0.index + 1 } ?? 0)
      }
      for child in children {
        let childName = name(child)
        if childName == "Location" || childName == "PatchLocation" {
          // Resolved against the MPD's own URL, not the BaseURL chain.
          let text = (child.stringValue ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
          if Self.isTextOnly(child), let new = rewritten(text, base: manifestURL, forced: form == .queryForm)
          {
            child.stringValue = new
          }
          continue
        }
        if childName == "BaseURL" { continue }
        if let names = MPDRewriter.urlAttributes[childName] {
          for attributeName in names {
            guard let attribute = MPDRewriter.attribute(attributeName, of: child),
              let value = attribute.stringValue
            else { continue }
            if let new = rewritten(value, base: inner, forced: false) { attribute.stringValue = new }
          }
        }
        visit(child, base: inner, isRoot: false)
      }
    }

    /// Whether an element holds only text (setting the text of one with child elements would drop them;
    /// such a URL element is not valid DASH and is left alone).
    private static func isTextOnly(_ element: XMLElement) -> Bool {
      !(element.children ?? []).contains { $0 is XMLElement }
    }

    private func rewritten(_ reference: String, base: String, forced: Bool) -> String? {
      if forced { return ProxyPathForm.forcedReference(reference, base: base) }
      return ProxyPathForm.rewrittenReference(reference, base: base)
    }

    private func name(_ element: XMLElement) -> String {
      element.localName ?? element.name ?? ""
    }
  }
}

/// A strict first pass with `XMLParser`: `XMLDocument` recovers from some errors (a mismatched end tag) without
/// throwing, so whether the document is well-formed, and its root element, are found here.
private final class XMLCheck: NSObject, XMLParserDelegate {
  struct Problem {
    var line: Int
    var column: Int
    var reason: String
  }
  private(set) var rootName: String?
  private(set) var problem: Problem?

  init(_ data: Data) {
    super.init()
    let parser = XMLParser(data: data)
    parser.shouldProcessNamespaces = true
    parser.shouldResolveExternalEntities = false
    parser.delegate = self
    let parsed = parser.parse()
    if problem == nil, !parsed || parser.parserError != nil {
      note(parser, parser.parserError)
    }
  }

  func parser(
    _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    if rootName == nil { rootName = elementName }
  }

  func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
    if problem == nil { note(parser, parseError) }
  }

  private func note(_ parser: XMLParser, _ error: (any Error)?) {
    let code = (error as NSError?)?.code
    problem = Problem(
      line: parser.lineNumber, column: parser.columnNumber,
      reason: "not well-formed XML (libxml2 error \(code.map(String.init) ?? "unknown"))")
  }
}

/// Why an MPD cannot be rewritten. Each case names the MPD's URL.
public enum MPDError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The MPD is longer than `MPDRewriter.maxManifestBytes`.
  case tooLarge(url: String, bytes: Int, limit: Int)
  /// The XML does not parse.
  case malformed(url: String, line: Int, column: Int, reason: String)
  /// The root element is not `MPD` (nil: there is no root element).
  case notAnMPD(url: String, root: String?)
  /// The document has a DTD (`<!DOCTYPE`), which an MPD never needs.
  case documentType(url: String)

  public var description: String {
    switch self {
    case .tooLarge(let url, let bytes, let limit):
      "\(url): MPD of \(bytes) bytes is larger than the limit of \(limit) bytes"
    case .malformed(let url, let line, let column, let reason):
      "\(url) line \(line) column \(column): \(reason)"
    case .notAnMPD(let url, let root):
      "\(url) is not an MPD: \(root.map { "its root element is <\($0.prefix(60))>" } ?? "it has no root element")"
    case .documentType(let url):
      "\(url): the MPD has a document type declaration (<!DOCTYPE), which the proxy does not accept"
    }
  }
}
