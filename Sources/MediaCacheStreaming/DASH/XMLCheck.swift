import Foundation

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// A strict first pass with `XMLParser`: `XMLDocument` recovers from some errors (a mismatched end tag) without
/// throwing, so whether the document is well-formed, and its root element, are found here.
final class XMLCheck: NSObject, XMLParserDelegate {
  struct Problem {
    var line: Int
    var column: Int
    var reason: String
  }
  private(set) var rootName: String?
  private(set) var problem: Problem?
  /// Whether the root element has a `BaseURL` child.
  private(set) var rootHasBaseURL = false
  private var depth = 0

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
    depth += 1
    if depth == 2, elementName == "BaseURL" { rootHasBaseURL = true }
  }

  func parser(
    _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?
  ) {
    depth -= 1
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
