import Foundation
import MediaCache

/// Why an MPD cannot be rewritten: the MPD's URL and what is wrong (`code`, `description`).
///
/// A struct with an open set of codes, as NIOFileSystem's `FileSystemError`, rather than an enum: a new code
/// does not break a caller's exhaustive `switch`. Match on `code`; the static members named after each code
/// build the errors that are thrown, and two errors are equal when they say the same thing.
public struct MPDError: Error, Sendable, Equatable, CustomStringConvertible {
  /// What kind of failure: compare with the static members of `ErrorCode` for this type; new codes may be added.
  public typealias Code = ErrorCode<MPDError>

  /// The failure with its details, for this package's own code and tests.
  package enum Kind: Sendable, Equatable {
    case tooLarge(url: String, bytes: Int, limit: Int)
    case malformed(url: String, line: Int, column: Int, reason: String)
    case notAnMPD(url: String, root: String?)
    case documentType(url: String)
    case notUTF8(url: String)
    case processingInstruction(url: String)
  }

  package var kind: Kind

  package init(kind: Kind) { self.kind = kind }

  /// What kind of failure (named as the case of `kind`).
  public var code: Code { Code(caseOf: kind) }

  /// The URL of the document concerned.
  public var url: String {
    switch kind {
    case .tooLarge(let url, _, _): url
    case .malformed(let url, _, _, _): url
    case .notAnMPD(let url, _): url
    case .documentType(let url): url
    case .notUTF8(let url): url
    case .processingInstruction(let url): url
    }
  }

  /// An error of code `tooLarge`.
  public static func tooLarge(url: String, bytes: Int, limit: Int) -> MPDError {
    MPDError(kind: .tooLarge(url: url, bytes: bytes, limit: limit))
  }
  /// An error of code `malformed`.
  public static func malformed(url: String, line: Int, column: Int, reason: String) -> MPDError {
    MPDError(kind: .malformed(url: url, line: line, column: column, reason: reason))
  }
  /// An error of code `notAnMPD`.
  public static func notAnMPD(url: String, root: String?) -> MPDError {
    MPDError(kind: .notAnMPD(url: url, root: root))
  }
  /// An error of code `documentType`.
  public static func documentType(url: String) -> MPDError { MPDError(kind: .documentType(url: url)) }
  /// An error of code `notUTF8`.
  public static func notUTF8(url: String) -> MPDError { MPDError(kind: .notUTF8(url: url)) }
  /// An error of code `processingInstruction`.
  public static func processingInstruction(url: String) -> MPDError {
    MPDError(kind: .processingInstruction(url: url))
  }

  /// One line for a person: the MPD's URL and what is wrong.
  public var description: String {
    switch kind {
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

extension ErrorCode where Domain == MPDError {
  /// The MPD is longer than `MPDRewriter.maxManifestBytes`.
  public static let tooLarge = Self("tooLarge")
  /// The XML does not parse.
  public static let malformed = Self("malformed")
  /// The root element is not `MPD` (nil: there is no root element).
  public static let notAnMPD = Self("notAnMPD")
  /// The document has a DTD (`<!DOCTYPE`), which an MPD never needs.
  public static let documentType = Self("documentType")
  /// The document is not UTF-8 text.
  public static let notUTF8 = Self("notUTF8")
  /// The document has a processing instruction (`<?...?>`) other than the XML declaration.
  public static let processingInstruction = Self("processingInstruction")
}
