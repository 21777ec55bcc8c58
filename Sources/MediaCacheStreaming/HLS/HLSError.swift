import Foundation

/// Why a playlist cannot be read or rewritten. Each case names the playlist's URL and, where there is one,
/// the 1-based line.
public enum HLSError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The first line is not `#EXTM3U` (after an optional byte order mark); `firstLine` is its first 80
  /// characters.
  case notAPlaylist(url: String, firstLine: String)
  /// A line breaks the playlist format in a way that matters (see `HLSPlaylist.parse`).
  case malformedLine(url: String, line: Int, reason: String)
  /// A URI that cannot be resolved against the playlist's URL (not a URI reference, or an http URL without a
  /// host).
  case unresolvableURI(url: String, line: Int, uri: String)
  /// The playlist is longer than `HLSPlaylist.maxPlaylistBytes`.
  case tooLarge(url: String, bytes: Int, limit: Int)
  /// `rewrite`'s transform returned something that cannot stand in a playlist line.
  case invalidReplacement(url: String, line: Int, reason: String)

  /// One line for a person: the playlist's URL, the line where there is one, and what is wrong.
  public var description: String {
    switch self {
    case .notAPlaylist(let url, let firstLine):
      "\(url) is not an HLS playlist: its first line is '\(firstLine)', not #EXTM3U"
    case .malformedLine(let url, let line, let reason): "\(url) line \(line): \(reason)"
    case .unresolvableURI(let url, let line, let uri):
      "\(url) line \(line): URI '\(uri.prefix(200))' cannot be resolved against the playlist's URL"
    case .tooLarge(let url, let bytes, let limit):
      "\(url): playlist of \(bytes) bytes is larger than the limit of \(limit) bytes"
    case .invalidReplacement(let url, let line, let reason):
      "\(url) line \(line): cannot rewrite the URI: \(reason)"
    }
  }
}
