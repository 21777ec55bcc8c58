/// Which bytes of an object to read: what an HTTP `Range` header asks for (the proxy parses it into this), what
/// `CachingReader.read` and `prefetch` take, and what `mediacache fetch --range` names. In the core so that
/// every layer can name a range the same way.
public enum RequestedRange: Sendable, Equatable {
  /// The whole object.
  case all
  /// Bytes `start..<end`.
  case bounded(Range<Int64>)
  /// From `start` to the end (`bytes=N-`).
  case from(Int64)
  /// The last `count` bytes (`bytes=-N`).
  case suffix(Int64)

  /// The absolute bytes of this range in an object of `length` bytes; nil if it is unsatisfiable (starts at or
  /// past the end, or a suffix of nothing), as RFC 9110 §14.1.2 defines it.
  public func resolved(length: Int64) -> Range<Int64>? {
    switch self {
    case .all: return 0..<length
    case .bounded(let bounds):
      guard bounds.lowerBound < length else { return nil }
      return bounds.lowerBound..<min(bounds.upperBound, length)
    case .from(let start):
      guard start < length else { return nil }
      return start..<length
    case .suffix(let count):
      guard count > 0, length > 0 else { return nil }
      return max(0, length - count)..<length
    }
  }
}
