import Foundation
import MediaCache

/// Why a playlist cannot be read or rewritten: the playlist's URL, the 1-based line where there is one, and
/// what is wrong (`code`, `description`).
///
/// A struct with an open set of codes, as NIOFileSystem's `FileSystemError`, rather than an enum: a new code
/// does not break a caller's exhaustive `switch`. Match on `code`; the static members named after each code
/// build the errors that are thrown, and two errors are equal when they say the same thing.
public struct HLSError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The failure with its details (all but the URL, which every code has), for this package's own code and
  /// tests.
  package enum Kind: Sendable, Equatable {
    case notAPlaylist(firstLine: String)
    case malformedLine(line: Int, reason: String)
    case unresolvableURI(line: Int, uri: String)
    case tooLarge(bytes: Int, limit: Int)
    case invalidReplacement(line: Int, reason: String)
  }

  /// The URL of the document concerned.
  public let url: String

  package var kind: Kind

  /// What kind of failure (named as the case of `kind`).
  public var code: Code { Code(caseOf: kind) }

  /// The 1-based line of the playlist concerned, where there is one.
  public var line: Int? {
    switch kind {
    case .malformedLine(let line, _), .unresolvableURI(let line, _), .invalidReplacement(let line, _): line
    case .notAPlaylist, .tooLarge: nil
    }
  }

  /// An error of code `notAPlaylist`.
  public static func notAPlaylist(url: String, firstLine: String) -> HLSError {
    HLSError(url: url, kind: .notAPlaylist(firstLine: firstLine))
  }
  /// An error of code `malformedLine`.
  public static func malformedLine(url: String, line: Int, reason: String) -> HLSError {
    HLSError(url: url, kind: .malformedLine(line: line, reason: reason))
  }
  /// An error of code `unresolvableURI`.
  public static func unresolvableURI(url: String, line: Int, uri: String) -> HLSError {
    HLSError(url: url, kind: .unresolvableURI(line: line, uri: uri))
  }
  /// An error of code `tooLarge`.
  public static func tooLarge(url: String, bytes: Int, limit: Int) -> HLSError {
    HLSError(url: url, kind: .tooLarge(bytes: bytes, limit: limit))
  }
  /// An error of code `invalidReplacement`.
  public static func invalidReplacement(url: String, line: Int, reason: String) -> HLSError {
    HLSError(url: url, kind: .invalidReplacement(line: line, reason: reason))
  }

  /// One line for a person: the playlist's URL, the line where there is one, and what is wrong.
  public var description: String {
    switch kind {
    case .notAPlaylist(let firstLine):
      "\(url) is not an HLS playlist: its first line is '\(firstLine)', not #EXTM3U"
    case .malformedLine(let line, let reason): "\(url) line \(line): \(reason)"
    case .unresolvableURI(let line, let uri):
      "\(url) line \(line): URI '\(uri.prefix(200))' cannot be resolved against the playlist's URL"
    case .tooLarge(let bytes, let limit):
      "\(url): playlist of \(bytes) bytes is larger than the limit of \(limit) bytes"
    case .invalidReplacement(let line, let reason):
      "\(url) line \(line): cannot rewrite the URI: \(reason)"
    }
  }
}

extension HLSError {
  /// What kind of failure. New codes may be added: a `switch` over them outside this package needs an
  /// `@unknown default`.
  @nonexhaustive public enum Code: String, ErrorCode {
    /// The first line is not `#EXTM3U` (after an optional byte order mark); `firstLine` is its first 80
    /// characters.
    case notAPlaylist
    /// A line breaks the playlist format in a way that matters (see `HLSPlaylist.parse`).
    case malformedLine
    /// A URI that cannot be resolved against the playlist's URL (not a URI reference, or an http URL without a
    /// host).
    case unresolvableURI
    /// The playlist is longer than `HLSPlaylist.maxPlaylistBytes`.
    case tooLarge
    /// `rewrite`'s transform returned something that cannot stand in a playlist line.
    case invalidReplacement
  }
}
