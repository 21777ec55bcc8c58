// libFuzzer target for the DASH MPD rewriter of the proxy (`MPDRewriter.rewrite`, `.mayBeManifest`), the
// path-form mapping it relies on (`ProxyPathForm`, `ProxiedURL.originURL(inRequestTarget:)`) and the MPD
// model of `fetch --dash` (`MPDSegments.parse` and each representation's `segments(limit:)`, which must only
// return or throw an `MPDError` with a one-line description, and list at most `limit` segments).
// Built and run by `tools/fuzz/run mpd`; see tools/fuzz/README.md.
//
// The input is an MPD body, rewritten as the proxy rewrites it for a path-form request and for a query-form
// request against a fixed origin URL. Each call must return or throw an `MPDError` (never trap); an error's
// description is one line. If the rewrite succeeds:
//   1. the output is well-formed XML (checked by an `XMLParser` pass) whose root is `MPD`, and
//      `isDynamic` says whether the input root's `type` is `dynamic`;
//   2. input and output have the same elements in the same order (local names), except that the query form
//      may add one top-level `BaseURL`; every attribute that is not a URL attribute is unchanged;
//   3. every URL (BaseURL, Location, PatchLocation text, the URL attributes of SegmentTemplate, SegmentURL,
//      Initialization, RepresentationIndex, BitstreamSwitching) is either unchanged or an absolute-path
//      reference `/http/...` or `/https/...` that the proxy maps back (`ProxiedURL.originURL(inRequestTarget:)`
//      gives a non-nil http(s) URL); in the path form an unchanged URL is never an absolute http(s) URL that
//      has a path form (those must all be rewritten), and a rewritten absolute http(s) URL maps back to
//      itself (scheme lowercased, fragment dropped, "/" for an empty path) when it has no dot segments;
//   4. template identifiers survive: every `$...$` run of a rewritten value is found in the input value.
// `mayBeManifest` must accept the MPD content type whatever the URL. A violated property ends in
// `fatalError`, which libFuzzer reports as a crash and saves the input.

import Foundation
import MediaCacheStreaming

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

/// libFuzzer's entry point: runs one input (`size` bytes at `data`) and returns 0; a violated property traps.
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
  enumerate(body)
  return 0
}

/// Parses `body` as `fetch --dash` does and lists every representation's segments (at most 1,000 each).
func enumerate(_ body: Data) {
  func checkDescription(_ error: MPDError) {
    let text = error.description
    if text.isEmpty || text.contains("\n") { fatalError("bad error description: \(text.debugDescription)") }
  }
  let presentation: MPDSegments.Presentation
  do {
    presentation = try MPDSegments.parse(body, url: URL(string: manifestURL)!)
  } catch {
    checkDescription(error)
    return
  }
  for period in presentation.periods {
    for set in period.adaptationSets {
      for representation in set.representations {
        do {
          let segments = try representation.segments(limit: 1000)
          if segments.count > 1000 { fatalError("\(segments.count) segments listed for a limit of 1000") }
        } catch {
          checkDescription(error)
        }
      }
    }
  }
}

/// A flattened element: its depth (the root is 1), local name, the text of a URL element, its URL attributes
/// and its other attributes.
struct Node {
  var depth: Int
  var name: String
  var text: String?
  var urls: [String: String]
  var others: [String: String]
}

/// The elements of a document in order, read with `XMLParser` (not `XMLDocument`, which on Linux never frees
/// what it parses and would be reported as a leak); nil if the document is not well-formed.
final class Flattener: NSObject, XMLParserDelegate {
  private(set) var nodes: [Node] = []
  private var stack: [Int] = []
  private var failed = false

  static func flatten(_ data: Data) -> [Node]? {
    let flattener = Flattener()
    let parser = XMLParser(data: data)
    parser.shouldProcessNamespaces = true
    parser.delegate = flattener
    guard parser.parse(), parser.parserError == nil, !flattener.failed else { return nil }
    return flattener.nodes
  }

  func parser(
    _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    let urlNames = urlAttributes[elementName] ?? []
    var node = Node(
      depth: stack.count + 1, name: elementName, text: textURLElements.contains(elementName) ? "" : nil,
      urls: [:], others: [:])
    for (name, value) in attributes {
      if urlNames.contains(name) { node.urls[name] = value } else { node.others[name] = value }
    }
    // A URL element with an element inside is not a plain URL: its text is not compared.
    if let parent = stack.last, nodes[parent].text != nil { nodes[parent].text = nil }
    stack.append(nodes.count)
    nodes.append(node)
  }

  func parser(
    _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?
  ) {
    if let index = stack.popLast(), let text = nodes[index].text {
      nodes[index].text = text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) { append(string) }

  func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
    append(String(decoding: CDATABlock, as: UTF8.self))
  }

  func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) { failed = true }

  private func append(_ string: String) {
    if let index = stack.last, nodes[index].text != nil { nodes[index].text! += string }
  }
}

func check(input: Data, output: MPDRewriter.Rewritten, form: MPDRewriter.RequestForm) {
  guard let inNodes = Flattener.flatten(input) else {
    fatalError("the input is not well-formed, yet rewritten")
  }
  guard var outNodes = Flattener.flatten(output.body) else {
    fatalError("the rewritten MPD is not well-formed")
  }
  guard outNodes.first?.name == "MPD" else { fatalError("the output root is \(outNodes.first?.name ?? "-")") }
  let type = inNodes.first?.others["type"]
  guard output.isDynamic == (type == "dynamic") else {
    fatalError("isDynamic is wrong for type \(type ?? "-")")
  }
  if case .queryForm = form, !inNodes.contains(where: { $0.depth == 2 && $0.name == "BaseURL" }) {
    // The added top-level BaseURL: the path form of the MPD's directory.
    let added = outNodes.indices.filter { outNodes[$0].depth == 2 && outNodes[$0].name == "BaseURL" }
    guard added.count == 1, outNodes[added[0]].text == "/https/Origin.example:8443/live/v1/" else {
      fatalError("the query form added \(added.map { outNodes[$0].text ?? "-" }), not one path-form BaseURL")
    }
    outNodes.remove(at: added[0])
  }
  guard inNodes.map(\.name) == outNodes.map(\.name), inNodes.map(\.depth) == outNodes.map(\.depth) else {
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
    if case .pathForm = form, isAbsoluteHTTP, ProxyPathForm.path(for: before) != nil {
      fatalError("\(element): the absolute URL \(before.debugDescription) was left as written")
    }
    return
  }
  guard after.hasPrefix("/http/") || after.hasPrefix("/https/") else {
    fatalError("\(element): \(before.debugDescription) became \(after.debugDescription), not a path form")
  }
  let target = String(after.prefix { $0 != "#" })
  guard let origin = ProxiedURL.originURL(inRequestTarget: target),
    origin.hasPrefix("http://") || origin.hasPrefix("https://")
  else { fatalError("\(element): the proxy would refuse its own rewrite \(after.debugDescription)") }
  if isAbsoluteHTTP, !before.contains("/."), !before.contains("\\") {
    var expected = String(before.prefix { $0 != "#" })
    let schemeEnd = expected.range(of: "://")!
    expected = expected[..<schemeEnd.lowerBound].lowercased() + expected[schemeEnd.lowerBound...]
    let afterAuthority = expected[schemeEnd.upperBound...]
    // The authority ends at the first '/' or '?'; without a '/' there, the path is empty and maps to "/".
    let authorityEnd = afterAuthority.firstIndex { $0 == "/" || $0 == "?" } ?? afterAuthority.endIndex
    if authorityEnd == afterAuthority.endIndex || afterAuthority[authorityEnd] == "?" {
      expected = String(expected[..<authorityEnd]) + "/" + expected[authorityEnd...]
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
