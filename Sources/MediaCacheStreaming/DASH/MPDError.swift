import Foundation

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
  /// The document is not UTF-8 text.
  case notUTF8(url: String)
  /// The document has a processing instruction (`<?...?>`) other than the XML declaration.
  case processingInstruction(url: String)

  /// One line for a person: the MPD's URL and what is wrong.
  public var description: String {
    switch self {
    case .tooLarge(let url, let bytes, let limit):
      "\(url): MPD of \(bytes) bytes is larger than the limit of \(limit) bytes"
    case .malformed(let url, let line, let column, let reason):
      "\(url) line \(line) column \(column): \(reason)"
    case .notAnMPD(let url, let root):
      "\(url) is not an MPD: \(root.map { "its root element is <\($0.prefix(60))>" } ?? "it has no root element")"
    case .processingInstruction(let url):
      "\(url): the MPD has a processing instruction (<?...?>), which the proxy does not accept"
    case .notUTF8(let url):
      "\(url): the MPD is not UTF-8 text, which the proxy requires"
    case .documentType(let url):
      "\(url): the MPD has a document type declaration (<!DOCTYPE), which the proxy does not accept"
    }
  }
}
