import MediaCache
import MediaCacheHTTP

/// A parsed HTTP `Range` request header (RFC 9110 §14.2), limited to the `bytes` unit.
public enum RangeHeader: Sendable, Equatable {
  /// No usable header: serve the whole object with `200`. A header in another unit, or one that does not
  /// parse, is ignored as RFC 9110 asks.
  case none
  /// One range.
  case single(RequestedRange)
  /// More than one range: the proxy answers `200` with the whole body rather than `multipart/byteranges`.
  case multiple

  /// The longest header value looked at; longer ones are ignored (a client cannot make the proxy parse
  /// megabytes).
  public static let maxLength = 4096

  /// Parses a `Range` header value.
  public init(_ value: String?) {
    guard let value, value.utf8.count <= Self.maxLength else {
      self = .none
      return
    }
    let trimmed = value.trimmingSpaces()
    guard trimmed.lowercased().hasPrefix("bytes=") else {
      self = .none
      return
    }
    let specs = trimmed.dropFirst("bytes=".count).split(separator: ",", omittingEmptySubsequences: false)
    var parsed: [RequestedRange] = []
    for spec in specs {
      guard let range = Self.parseSpec(String(spec).trimmingSpaces()) else {
        self = .none
        return
      }
      parsed.append(range)
    }
    switch parsed.count {
    case 0: self = .none
    case 1: self = .single(parsed[0])
    default: self = .multiple
    }
  }

  /// `a-b`, `a-` or `-n`, digits only.
  static func parseSpec(_ spec: String) -> RequestedRange? {
    guard let dash = spec.firstIndex(of: "-") else { return nil }
    let first = spec[..<dash]
    let last = spec[spec.index(after: dash)...]
    func number(_ text: Substring) -> Int64? {
      guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
        return nil
      }
      return Int64(text)
    }
    if first.isEmpty {
      guard let count = number(last) else { return nil }
      return .suffix(count)
    }
    guard let start = number(first) else { return nil }
    if last.isEmpty { return .from(start) }
    guard let end = number(last), end >= start else { return nil }
    return .bounded(start..<(end + 1))
  }
}

extension String {
  /// The string without the spaces and tabs at either end, found in its UTF-8 in linear time. (Both ends of
  /// the result are next to an ASCII byte or an end, so they are scalar boundaries.)
  func trimmingSpaces() -> String {
    let utf8 = self.utf8
    func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    guard let first = utf8.firstIndex(where: { !isSpace($0) }),
      let last = utf8.lastIndex(where: { !isSpace($0) })
    else { return "" }
    return String(self[first..<utf8.index(after: last)])
  }
}
