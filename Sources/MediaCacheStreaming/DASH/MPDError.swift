import Foundation
import MediaCache

/// Why a DASH MPD cannot be rewritten (the proxy), read or enumerated (`fetch --dash`): always with the MPD's
/// URL, where in it where that is known (a line, or a path such as
/// `Period 1 > AdaptationSet 0 > Representation 'v1'`) and what is wrong (`code`, `description`).
///
/// A struct with an open set of codes, as NIOFileSystem's `FileSystemError`, rather than an enum: a new code
/// does not break a caller's exhaustive `switch`. Match on `code`; the static members named after each code
/// build the errors that are thrown, and two errors are equal when they say the same thing.
public struct MPDError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The failure with its details (all but the URL, which every code has), for this package's own code and
  /// tests.
  package enum Kind: Sendable, Equatable {
    case tooLarge(bytes: Int, limit: Int)
    case malformed(line: Int, column: Int?, reason: String)
    case notAnMPD(root: String?)
    case documentType
    case notUTF8
    case processingInstruction
    case invalid(at: String, reason: String)
    case unsupported(at: String, feature: String)
    case dynamic
    case tooManySegments(at: String, limit: Int)
  }

  /// The URL of the document concerned.
  public let url: String

  package var kind: Kind

  /// What kind of failure (named as the case of `kind`).
  public var code: Code { Code(caseOf: kind) }

  /// An error of code `tooLarge`.
  public static func tooLarge(url: String, bytes: Int, limit: Int) -> MPDError {
    MPDError(url: url, kind: .tooLarge(bytes: bytes, limit: limit))
  }
  /// An error of code `malformed` (`column` where the parser says it).
  public static func malformed(url: String, line: Int, column: Int?, reason: String) -> MPDError {
    MPDError(url: url, kind: .malformed(line: line, column: column, reason: reason))
  }
  /// An error of code `notAnMPD`.
  public static func notAnMPD(url: String, root: String?) -> MPDError {
    MPDError(url: url, kind: .notAnMPD(root: root))
  }
  /// An error of code `documentType`.
  public static func documentType(url: String) -> MPDError { MPDError(url: url, kind: .documentType) }
  /// An error of code `notUTF8`.
  public static func notUTF8(url: String) -> MPDError { MPDError(url: url, kind: .notUTF8) }
  /// An error of code `processingInstruction`.
  public static func processingInstruction(url: String) -> MPDError {
    MPDError(url: url, kind: .processingInstruction)
  }
  /// An error of code `invalid`.
  public static func invalid(url: String, at: String, reason: String) -> MPDError {
    MPDError(url: url, kind: .invalid(at: at, reason: reason))
  }
  /// An error of code `unsupported`.
  public static func unsupported(url: String, at: String, feature: String) -> MPDError {
    MPDError(url: url, kind: .unsupported(at: at, feature: feature))
  }
  /// An error of code `dynamic`.
  public static func dynamic(url: String) -> MPDError { MPDError(url: url, kind: .dynamic) }
  /// An error of code `tooManySegments`.
  public static func tooManySegments(url: String, at: String, limit: Int) -> MPDError {
    MPDError(url: url, kind: .tooManySegments(at: at, limit: limit))
  }

  /// One line for a person: the MPD's URL and what is wrong. What it quotes of the document (a `BaseURL`, an
  /// attribute) keeps its line breaks and other control characters as escapes (`\n`, `\u{2028}`), so it stays
  /// one line in a log or a refusal's reason.
  public var description: String { Self.oneLine(text) }

  /// `text` with control characters and the Unicode line and paragraph separators written as escapes.
  static func oneLine(_ text: String) -> String {
    func breaks(_ scalar: Unicode.Scalar) -> Bool {
      scalar.properties.generalCategory == .control || scalar == "\u{2028}" || scalar == "\u{2029}"
    }
    guard text.unicodeScalars.contains(where: breaks) else { return text }
    var escaped = String.UnicodeScalarView()
    for scalar in text.unicodeScalars {
      if breaks(scalar) {
        escaped.append(contentsOf: scalar.escaped(asASCII: true).unicodeScalars)
      } else {
        escaped.append(scalar)
      }
    }
    return String(escaped)
  }

  private var text: String {
    switch kind {
    case .tooLarge(let bytes, let limit):
      "\(url): MPD of \(bytes) bytes is larger than the limit of \(limit) bytes"
    case .malformed(let line, let column, let reason):
      "\(url) is not a DASH MPD: malformed XML at line \(line)\(column.map { " column \($0)" } ?? ""): \(reason)"
    case .notAnMPD(let root):
      "\(url) is not a DASH MPD: "
        + (root.map { "its root element is <\($0.prefix(80))>, not <MPD>" } ?? "it has no root element")
    case .documentType:
      "\(url): the MPD has a document type declaration (<!DOCTYPE), which is not accepted"
    case .notUTF8: "\(url) is not a DASH MPD: it is not UTF-8 text"
    case .processingInstruction:
      "\(url): the MPD has a processing instruction (<?...?>) other than the XML declaration, which is not accepted"
    case .invalid(let at, let reason): "\(url): \(at): \(reason)"
    case .unsupported(let at, let feature): "\(url): \(at): \(feature) is not supported"
    case .dynamic:
      "\(url) is a live MPD (type=\"dynamic\"); only static (on-demand) MPDs can be fetched"
    case .tooManySegments(let at, let limit):
      "\(url): \(at): more than \(limit) segments (raise the limit if this is intended)"
    }
  }
}

extension MPDError {
  /// What kind of failure. New codes may be added: a `switch` over them outside this package needs an
  /// `@unknown default`.
  @nonexhaustive public enum Code: String, ErrorCode {
    /// The MPD is longer than the reader's limit (`MPDRewriter.maxManifestBytes`, `MPDSegments.maxManifestBytes`).
    case tooLarge
    /// The XML does not parse (at `line`, and `column` where known).
    case malformed
    /// The root element is not `MPD` (nil: there is no root element).
    case notAnMPD
    /// The document has a document type declaration (`<!DOCTYPE`): an MPD never needs one, and its entities are
    /// how an XML document makes a parser expand a few bytes into gigabytes.
    case documentType
    /// The document is not UTF-8 text.
    case notUTF8
    /// The document has a processing instruction (`<?...?>`) other than the XML declaration.
    case processingInstruction
    /// A value is missing or cannot be used (an attribute, a template, a byte range, a URL).
    case invalid
    /// A feature `fetch --dash` does not handle (remote `xlink:href` elements, `$SubNumber$`, ...).
    case unsupported
    /// The MPD is live (`type="dynamic"`); only static (on-demand) MPDs are enumerated.
    case dynamic
    /// Enumerating the segments would pass `limit` segments.
    case tooManySegments
  }
}
