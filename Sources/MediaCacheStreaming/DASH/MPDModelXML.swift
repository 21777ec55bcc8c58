import Foundation
import MediaCache

#if canImport(FoundationXML)
  import FoundationXML
#endif

extension MPDSegments {
  /// One XML element as far as the MPD model needs it: local name (namespace prefix dropped), attributes by
  /// local name, children, and the text directly inside it (trimmed).
  final class Element {
    let name: String
    let attributes: [String: String]
    var children: [Element] = []
    var text = ""

    init(name: String, attributes: [String: String]) {
      self.name = name
      self.attributes = attributes
    }

    /// The children named `name`, in document order.
    func children(_ name: String) -> [Element] { children.filter { $0.name == name } }
    /// The first child named `name`.
    func child(_ name: String) -> Element? { children.first { $0.name == name } }
    subscript(_ attribute: String) -> String? { attributes[attribute] }
  }

  /// Elements deeper than this are parsed but not kept: the model reads at most MPD > Period > AdaptationSet
  /// > Representation > SegmentTemplate > SegmentTimeline > S (7), and a deep chain of kept objects would be
  /// released recursively.
  static let maxKeptDepth = 8

  /// Parses `data` into a tree of elements with FoundationXML's `XMLParser` (external entities are not
  /// resolved). `data` has passed `MPDInputCheck.screen`.
  static func parseXML(_ data: Data, url: String) throws(MPDError) -> Element {
    let builder = TreeBuilder()
    let parser = XMLParser(data: data)
    parser.shouldResolveExternalEntities = false
    parser.shouldProcessNamespaces = false
    parser.delegate = builder
    let parsed = parser.parse()
    // libxml2 recovers from some errors (a mismatched end tag) and parse() then returns true: any error
    // reported on the way makes the document malformed.
    if let failure = builder.failure {
      throw .malformed(
        url: url, line: failure.line, column: failure.column, reason: xmlErrorReason(failure.code))
    }
    if !parsed, let error = parser.parserError {
      throw .malformed(
        url: url, line: parser.lineNumber, column: parser.columnNumber,
        reason: xmlErrorReason((error as NSError).code))
    }
    guard let root = builder.root else {
      throw .malformed(url: url, line: max(1, parser.lineNumber), column: nil, reason: "no root element")
    }
    return root
  }

  /// What a libxml2 error code (FoundationXML passes them through) means, for the common ones.
  static func xmlErrorReason(_ code: Int) -> String {
    let known: [Int: String] = [
      4: "the document is empty or does not start with an element",
      5: "extra content after the root element",
      9: "invalid character",
      26: "undeclared entity",
      41: "attribute without a value",
      42: "attribute given twice",
      73: "'>' expected",
      76: "end tag does not match the start tag",
      77: "element not closed before the end",
    ]
    return known[code] ?? "XML error \(code)"
  }

  /// Drops a namespace prefix: `dash:MPD` -> `MPD`.
  static func localName(_ qualified: String) -> String {
    guard let colon = qualified.lastIndex(of: ":") else { return qualified }
    return String(qualified[qualified.index(after: colon)...])
  }

  /// Collects the element tree; used by one parse on one thread.
  private final class TreeBuilder: NSObject, XMLParserDelegate {
    var root: Element?
    /// The first error: libxml2's code and the line and column it was found at.
    var failure: (code: Int, line: Int, column: Int)?
    private var stack: [Element] = []
    /// Depth of the current element, kept or not.
    private var depth = 0

    func parser(
      _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
      qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]
    ) {
      depth += 1
      guard depth <= MPDSegments.maxKeptDepth else { return }
      var attributes: [String: String] = [:]
      for (key, value) in attributeDict {
        // xmlns declarations are not attributes of the model; `xlink:href` keeps its prefix so that remote
        // elements are recognised.
        if key == "xmlns" || key.hasPrefix("xmlns:") { continue }
        attributes[key.hasPrefix("xlink:") ? key : MPDSegments.localName(key)] = value
      }
      let element = Element(name: MPDSegments.localName(elementName), attributes: attributes)
      if let parent = stack.last {
        parent.children.append(element)
      } else if root == nil {
        root = element
      }
      stack.append(element)
    }

    func parser(
      _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
      qualifiedName qName: String?
    ) {
      defer { depth -= 1 }
      guard depth <= MPDSegments.maxKeptDepth, let element = stack.popLast() else { return }
      element.text = element.text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
      guard depth <= MPDSegments.maxKeptDepth, let element = stack.last else { return }
      element.text += string
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
      guard depth <= MPDSegments.maxKeptDepth, let element = stack.last else { return }
      element.text += String(decoding: CDATABlock, as: UTF8.self)
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
      failure = failure ?? ((parseError as NSError).code, parser.lineNumber, parser.columnNumber)
    }
  }

  // MARK: Values

  /// An `xs:duration` (`PT4.0S`, `P1DT2H30M`, `-PT1S` is refused) in seconds. Years and months count as 365
  /// and 30 days, as players do.
  static func duration(_ text: String) -> Double? {
    var rest = Substring(text.trimmingCharacters(in: .whitespaces))
    guard rest.first == "P" else { return nil }
    rest = rest.dropFirst()
    var seconds = 0.0
    var inTime = false
    var number = ""
    var sawField = false
    for character in rest {
      switch character {
      case "T":
        guard !inTime, number.isEmpty else { return nil }
        inTime = true
      case "0"..."9", ".":
        number.append(character)
      default:
        guard let value = Double(number), value.isFinite else { return nil }
        let unit: Double
        switch (character, inTime) {
        case ("Y", false): unit = 365 * 86_400
        case ("M", false): unit = 30 * 86_400
        case ("W", false): unit = 7 * 86_400
        case ("D", false): unit = 86_400
        case ("H", true): unit = 3_600
        case ("M", true): unit = 60
        case ("S", true): unit = 1
        default: return nil
        }
        seconds += value * unit
        number = ""
        sawField = true
      }
    }
    guard number.isEmpty, sawField, seconds.isFinite else { return nil }
    return seconds
  }

  /// A byte range `first-last` (both inclusive, as in `mediaRange`, `indexRange` and `Initialization@range`).
  static func byteRange(_ text: String) -> ClosedRange<Int64>? {
    let parts = text.trimmingCharacters(in: .whitespaces).split(
      separator: "-", omittingEmptySubsequences: false)
    // `last` below Int64.max: readers make it an exclusive end (`last + 1`).
    guard parts.count == 2, let first = Int64(parts[0]), let last = Int64(parts[1]), first >= 0,
      first <= last,
      last < Int64.max
    else { return nil }
    return first...last
  }
}
