import Foundation

/// What every MPD passes before FoundationXML's `XMLParser` sees it, for the proxy's rewriter and for
/// `MPDSegments` alike: the parser must never meet input that makes it trap or expand entities.
enum MPDInputCheck {
  /// Throws unless `body` is at most `limit` bytes of UTF-8 text without a document type declaration and
  /// without a processing instruction other than the XML declaration.
  ///
  /// - Throws: `MPDError.tooLarge`, `.notUTF8`, `.documentType`, `.processingInstruction`, in that order.
  static func screen(_ body: Data, url: String, limit: Int) throws(MPDError) {
    if body.count > limit { throw .tooLarge(url: url, bytes: body.count, limit: limit) }
    // XMLParser traps on a name or value that is not UTF-8 (found by tools/fuzz/run mpd), so the bytes are
    // checked first. MPDs are UTF-8 in practice; another encoding is refused.
    if String(validating: body, as: UTF8.self) == nil { throw .notUTF8(url: url) }
    // Before any parsing: a DTD's entities would be expanded by the parser.
    if body.range(of: Data("<!DOCTYPE".utf8)) != nil { throw .documentType(url: url) }
    // XMLParser reads a null pointer for a processing instruction without data (`<?a?>`, found by
    // tools/fuzz/run mpd), so none is accepted but the XML declaration; MPDs have none.
    if hasProcessingInstruction(body) { throw .processingInstruction(url: url) }
  }

  /// Whether `body` has a `<?` other than an XML declaration at its start (after an optional byte order mark).
  static func hasProcessingInstruction(_ body: Data) -> Bool {
    var declarationStart = body.startIndex
    if body.starts(with: [0xEF, 0xBB, 0xBF]) { declarationStart += 3 }
    var search = body.startIndex..<body.endIndex
    while let found = body.range(of: Data("<?".utf8), in: search) {
      let isDeclaration =
        found.lowerBound == declarationStart
        && body[found.upperBound...].starts(with: Data("xml".utf8))
        && body.count > found.upperBound + 3
        && [0x20, 0x09, 0x0A, 0x0D].contains(body[found.upperBound + 3])
      if !isDeclaration { return true }
      search = found.upperBound..<body.endIndex
    }
    return false
  }
}
