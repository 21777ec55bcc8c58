// libFuzzer target for the DASH MPD rewriter of the proxy (`MPDRewriter.rewrite`, `.mayBeManifest`) and the
// path-form mapping it relies on (`ProxyPathForm`, `ProxyServer.originURL(inRequestTarget:)`).
// Built and run by `tools/fuzz/run mpd`; see tools/fuzz/README.md.
//
// The input is an MPD body, rewritten as the proxy rewrites it for a path-form request and for a query-form
// request against a fixed origin URL. Each call must return or throw an `MPDError` (never trap); an error's
// description is one line. If the rewrite succeeds:
//   1. the output is well-formed XML (checked by a strict `XMLParser` pass) whose root is `MPD`, and
//      `isDynamic` says whether the input root's `type` is `dynamic`;
//   2. input and output have the same elements in the same order (local names), except that the query form
//      may add one top-level `BaseURL`; every attribute that is not a URL attribute is unchanged;
//   3. every URL (BaseURL, Location, PatchLocation text, the URL attributes of SegmentTemplate, SegmentURL,
//      Initialization, RepresentationIndex, BitstreamSwitching) is either unchanged or an absolute-path
//      reference `/http/...` or `/https/...` that the proxy maps back (`ProxyServer.originURL(inRequestTarget:)`
//      gives a non-nil http(s) URL); in the path form an unchanged URL is never an absolute http(s) URL that
//      has a path form (those must all be rewritten), and a rewritten absolute http(s) URL maps back to
//      itself (scheme lowercased, fragment dropped, "/" for an empty path) when it has no dot segments;
//   4. template identifiers survive: every `$...$` run of a rewritten value is found in the input value.
// `mayBeManifest` must accept the MPD content type whatever the URL. A violated property ends in
// `fatalError`, which libFuzzer reports as a crash and saves the input.

import Foundation
import MediaCacheProxy

#if canImport(FoundationXML)
  import FoundationXML
#endif

let manifestURL = "https://Origin.example:8443/live/v1/manifest.mpd?token=a%20b&x=1"
let textURLElements: Set<String> = ["BaseURL", "Location", "PatchLocation"]
let urlAttributes: [String: Set<String>] = [
  "SegmentTemplate": ["media", "initialization", "index", "bitstreamSwitching"],
  "SegmentURL": ["media", "index"],
  "Initialization": ["sourceURL"],
  "RepresentationIndex": ["sourceURL"],
  "BitstreamSwitching": ["sourceURL"],
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let body = Data(bytes: data, count: size)
  guard MPDRewriter.mayBeManifest(contentType: "Application/DASH+XML; x=1", url: "https://h/a.bin") else {
    fatalError("mayBeManifest refused the MPD content type")
  }
  for form in [MPDRewriter.RequestForm.pathForm, .queryForm] {
    let result: MPDRewriter.Rewritten
    do {
      result = try MPDRewriter.rewrite(body, manifestURL: manifestURL, form: form)
    } catch {
      let text = error.description
      if text.isEmpty || text.contains("\n") { fatalError("bad error description: \(text.debugDescription)") }
      continue
    }
    check(input: body, output: result, form: form)
  }
  return 0
}

/// A flattened element: its local name, its URL values and its other attributes.
struct Node {
  var name: String
  var text: String?
  var urls: [String: String]
  var others: [String: String]
}

func flatten(_ element: XMLElement, into nodes: inout [Node]) {
  let name = element.localName ?? element.name ?? ""
  var urls: [String: String] = [:]
  var others: [String: String] = [:]
  let urlNames = urlAttributes[name] ?? []
  for attribute in element.attributes ?? [] {
    let attributeName = attribute.name ?? ""
    if urlNames.contains(attributeName) {
      urls[attributeName] = attribute.stringValue ?? ""
    } else {
      others[attributeName] = attribute.stringValue ?? ""
    }
  }
  let text =
    textURLElements.contains(name)
    ? (element.stringValue ?? "").trimmingCharacters(in: .whitespacesAndNewlines) : nil
  nodes.append(Node(name: name, text: text, urls: urls, others: others))
  for child in element.children ?? [] {
    if let child = child as? XMLElement { flatten(child, into: &nodes) }
  }
}

func children(_ element: XMLElement) -> [XMLElement] {
  (element.children ?? []).compactMap { $0 as? XMLElement }
}

func parse(_ data: Data, what: String) -> XMLElement {
  let checker = StrictXML(data)
  guard checker.wellFormed else { fatalError("\(what) is not well-formed XML") }
  guard let document = try? XMLDocument(data: data, options: [.nodePreserveWhitespace]),
    let root = document.rootElement()
  else { fatalError("\(what) does not parse as a document") }
  return root
}

func check(input: Data, output: MPDRewriter.Rewritten, form: MPDRewriter.RequestForm) {
  let inRoot = parse(input, what: "the input (rewrite succeeded)")
  let outRoot = parse(output.body, what: "the rewritten MPD")
  guard outRoot.localName == "MPD" else { fatalError("the output root is \(outRoot.name ?? "-")") }
  let type = inRoot.attributes?.first { $0.name == "type" }?.stringValue
  guard output.isDynamic == (type == "dynamic") else {
    fatalError("isDynamic is wrong for type \(type ?? "-")")
  }
  if form == .queryForm, !children(inRoot).contains(where: { $0.localName == "BaseURL" }) {
    // The added top-level BaseURL: the path form of the MPD's directory.
    let added = children(outRoot).filter { $0.localName == "BaseURL" }
    guard added.count == 1, added[0].stringValue == "/https/Origin.example:8443/live/v1/" else {
      fatalError("the query form added \(added.map { $0.stringValue ?? "" }), not one path-form BaseURL")
    }
    added[0].detach()
  }
  var inNodes: [Node] = []
  var outNodes: [Node] = []
  flatten(inRoot, into: &inNodes)
  flatten(outRoot, into: &outNodes)
  guard inNodes.map(\.name) == outNodes.map(\.name) else {
    fatalError(
      "the elements changed: \(inNodes.map(\.name).prefix(50)) -> \(outNodes.map(\.name).prefix(50))")
  }
  for (old, new) in zip(inNodes, outNodes) {
    guard old.others == new.others, Set(old.urls.keys) == Set(new.urls.keys) else {
      fatalError("\(old.name): attributes changed: \(old.others) -> \(new.others)")
    }
    var pairs = old.urls.map { (old: $0.value, new: new.urls[$0.key]!) }
    if let text = old.text { pairs.append((text, new.text ?? "")) }
    for (before, after) in pairs { checkURL(before, after, in: old.name, form: form) }
  }
}

func checkURL(_ before: String, _ after: String, in element: String, form: MPDRewriter.RequestForm) {
  let lowered = before.lowercased()
  let isAbsoluteHTTP = lowered.hasPrefix("http://") || lowered.hasPrefix("https://")
  if before == after {
    if form == .pathForm, isAbsoluteHTTP, ProxyPathForm.path(for: before) != nil {
      fatalError("\(element): the absolute URL \(before.debugDescription) was left as written")
    }
    return
  }
  guard after.hasPrefix("/http/") || after.hasPrefix("/https/") else {
    fatalError("\(element): \(before.debugDescription) became \(after.debugDescription), not a path form")
  }
  let target = String(after.prefix { $0 != "#" })
  guard let origin = ProxyServer.originURL(inRequestTarget: target),
    origin.hasPrefix("http://") || origin.hasPrefix("https://")
  else { fatalError("\(element): the proxy would refuse its own rewrite \(after.debugDescription)") }
  if isAbsoluteHTTP, !before.contains("/."), !before.contains("\\") {
    var expected = String(before.prefix { $0 != "#" })
    let schemeEnd = expected.range(of: "://")!
    expected = expected[..<schemeEnd.lowerBound].lowercased() + expected[schemeEnd.lowerBound...]
    let afterAuthority = expected[schemeEnd.upperBound...]
    if !afterAuthority.contains("/") {
      let queryStart = afterAuthority.firstIndex(of: "?") ?? afterAuthority.endIndex
      expected = String(expected[..<queryStart]) + "/" + expected[queryStart...]
    }
    guard origin == expected else {
      fatalError("\(element): \(before.debugDescription) maps back to \(origin.debugDescription)")
    }
  }
  for identifier in templateIdentifiers(after) where !before.contains(identifier) {
    fatalError("\(element): template identifier \(identifier) appeared from nowhere in \(after)")
  }
}

/// The `$...$` runs of a value.
func templateIdentifiers(_ value: String) -> [Substring] {
  var result: [Substring] = []
  var rest = value[...]
  while let start = rest.firstIndex(of: "$") {
    let after = rest[rest.index(after: start)...]
    guard let end = after.firstIndex(of: "$") else { break }
    result.append(rest[start...end])
    rest = after[after.index(after: end)...]
  }
  return result
}

/// Whether a document is well-formed, by a strict `XMLParser` pass.
final class StrictXML: NSObject, XMLParserDelegate {
  private(set) var wellFormed = true
  init(_ data: Data) {
    super.init()
    let parser = XMLParser(data: data)
    parser.delegate = self
    parser.shouldProcessNamespaces = true
    if !parser.parse() || parser.parserError != nil { wellFormed = false }
  }
  func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) { wellFormed = false }
}
