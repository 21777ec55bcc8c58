/// A parsed HTTP `Range` request header (RFC 9110 §14.2), limited to the `bytes` unit: what the proxy parses
/// each request's `Range` with. Beside `RequestedRange`, what it parses into, so that it can be used (and fuzzed,
/// `tools/fuzz/run range`) without the proxy's server stack.
public enum RangeHeader: Sendable, Equatable {
  /// No usable header: serve the whole object with `200`. A header in another unit, or one that does not
  /// parse, is ignored as RFC 9110 asks.
  case none
  /// One range.
  case single(RequestedRange)
  /// More than one range: the proxy answers `200` with the whole body rather than `multipart/byteranges`.
  case multiple

  /// What is served: the one range, else the whole object.
  package var requested: RequestedRange {
    if case .single(let range) = self { range } else { .all }
  }

  /// The longest header value looked at; longer ones are ignored (a client cannot make the proxy parse
  /// megabytes).
  public static let maxLength = 4096

  /// Parses a `Range` header value (over its UTF-8, without copies: it runs for every request).
  public init(_ value: String?) {
    guard let value, value.utf8.count <= Self.maxLength else {
      self = .none
      return
    }
    var parsed: RequestedRange?
    var count = 0
    let valid = value.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
      var specs = Self.trimmed(bytes[...])
      // `bytes=`, its letters in either case.
      let unit = Self.unit
      func matches(_ byte: UInt8, _ expected: UInt8) -> Bool {
        byte == expected || (expected >= 0x61 && expected <= 0x7A && byte | 0x20 == expected)
      }
      guard specs.count >= unit.count, zip(specs.prefix(unit.count), unit).allSatisfy(matches) else {
        return false
      }
      specs = specs.dropFirst(unit.count)
      // The comma-separated specs, empty ones included (each must parse), without an array of them.
      while true {
        let comma = specs.firstIndex(of: UInt8(ascii: ",")) ?? specs.endIndex
        guard let range = Self.parseSpec(Self.trimmed(specs[..<comma])) else { return false }
        count += 1
        if count == 1 { parsed = range }
        guard comma < specs.endIndex else { return true }
        specs = specs[(comma + 1)...]
      }
    }
    guard let valid else {
      // Not contiguous (a bridged string): the same parse over a native copy.
      self = RangeHeader(String(decoding: Array(value.utf8), as: UTF8.self))
      return
    }
    switch (valid, count, parsed) {
    case (true, 1, let range?): self = .single(range)
    case (true, 2..., _): self = .multiple
    default: self = .none
    }
  }

  /// The range unit with its `=`, in UTF-8.
  private static let unit = Array("bytes=".utf8)

  /// `a-b`, `a-` or `-n`, digits only, in UTF-8.
  static func parseSpec(_ spec: Slice<UnsafeBufferPointer<UInt8>>) -> RequestedRange? {
    guard let dash = spec.firstIndex(of: UInt8(ascii: "-")) else { return nil }
    let first = spec[..<dash]
    let last = spec[(dash + 1)...]
    func number(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> Int64? {
      guard !digits.isEmpty, digits.count <= 18 else { return nil }
      var value: Int64 = 0
      for byte in digits {
        guard byte >= 48 && byte <= 57 else { return nil }
        value = value * 10 + Int64(byte - 48)
      }
      return value
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

  /// `bytes` without the spaces and tabs at either end.
  private static func trimmed(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Slice<UnsafeBufferPointer<UInt8>>
  {
    func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    guard let first = bytes.firstIndex(where: { !isSpace($0) }),
      let last = bytes.lastIndex(where: { !isSpace($0) })
    else { return bytes[bytes.endIndex...] }
    return bytes[first...last]
  }
}
