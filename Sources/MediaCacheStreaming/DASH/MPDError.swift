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

  /// The failure with its details (all but the URL, which every code has), for this package's own code and
  /// tests.
  package enum Kind: Sendable, Equatable {
    case tooLarge(bytes: Int, limit: Int)
    case malformed(line: Int, column: Int, reason: String)
    case notAnMPD(root: String?)
    case documentType
    case notUTF8
    case processingInstruction
  }

  /// The URL of the document concerned.
  public let url: String

  package var kind: Kind

  /// An error about the MPD at `url`.
  package init(url: String, kind: Kind) {
    self.url = url
    self.kind = kind
  }

  /// What kind of failure (named as the case of `kind`).
  public var code: Code { Code(caseOf: kind) }

  /// An error of code `tooLarge`.
  public static func tooLarge(url: String, bytes: Int, limit: Int) -> MPDError {
    MPDError(url: url, kind: .tooLarge(bytes: bytes, limit: limit))
  }
  /// An error of code `malformed`.
  public static func malformed(url: String, line: Int, column: Int, reason: String) -> MPDError {
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

  /// One line for a person: the MPD's URL and what is wrong.
  public var description: String {
    switch kind {
    case .tooLarge(let bytes, let limit):
      "\(url): MPD of \(bytes) bytes is larger than the limit of \(limit) bytes"
    case .malformed(let line, let column, let reason):
      "\(url) line \(line) column \(column): \(reason)"
    case .notAnMPD(let root):
      "\(url) is not an MPD: \(root.map { "its root element is <\($0.prefix(60))>" } ?? "it has no root element")"
    case .processingInstruction:
      "\(url): the MPD has a processing instruction (<?...?>), which the proxy does not accept"
    case .notUTF8:
      "\(url): the MPD is not UTF-8 text, which the proxy requires"
    case .documentType:
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
