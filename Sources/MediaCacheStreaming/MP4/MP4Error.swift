import MediaCache

/// Why the start of an MP4 (or QuickTime) file cannot be mapped to byte ranges: the file's URL, the box
/// concerned and its offset where there is one, and what is wrong (`code`, `description`).
///
/// A struct with an open set of codes, as the other errors of these libraries: match on `code`.
public struct MP4Error: Error, Sendable, Equatable, CustomStringConvertible {
  /// The failure with its details (all but the URL), for this package's own code and tests.
  package enum Kind: Sendable, Equatable {
    case invalidBox(type: String, offset: Int64, reason: String)
    case noMovieBox
    case tooLarge(type: String, bytes: Int64, limit: Int64)
    case invalidTable(track: UInt32, box: String, reason: String)
    case fragmented
  }

  /// The URL of the file concerned.
  public let url: String

  package var kind: Kind

  /// The error `kind` for the file at `url`.
  package init(url: String, kind: Kind) {
    self.url = url
    self.kind = kind
  }

  /// What kind of failure (named as the case of `kind`).
  public var code: Code { Code(caseOf: kind) }

  /// One line for a person: the file's URL, the box and what is wrong.
  public var description: String {
    switch kind {
    case .invalidBox(let type, let offset, let reason):
      "\(url): MP4 box '\(type)' at offset \(offset): \(reason)"
    case .noMovieBox: "\(url): no 'moov' box among the file's top-level boxes"
    case .tooLarge(let type, let bytes, let limit):
      "\(url): MP4 box '\(type)' of \(bytes) bytes is larger than the limit of \(limit) bytes"
    case .invalidTable(let track, let box, let reason): "\(url): track \(track) '\(box)': \(reason)"
    case .fragmented:
      "\(url): fragmented MP4 (its samples are in 'moof' boxes, not in the 'moov' sample tables)"
    }
  }
}

extension MP4Error {
  /// What kind of failure. New codes may be added: a `switch` over them outside this package needs an
  /// `@unknown default`.
  @nonexhaustive public enum Code: String, ErrorCode {
    /// A box header is short, names a size smaller than itself or reaches past its container.
    case invalidBox
    /// The top-level boxes end (or pass their count limit) without a `moov`.
    case noMovieBox
    /// The `moov` box is larger than `MP4StartRanges.maxMovieBoxBytes`.
    case tooLarge
    /// A sample table is short, contradicts another, or points outside the file.
    case invalidTable
    /// The file is fragmented: the sample tables of `moov` are empty and `mvex` says fragments follow.
    case fragmented
  }
}
