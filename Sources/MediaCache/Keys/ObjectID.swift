import Crypto
import Foundation

/// The identity of a cached object: the SHA-256 of its cache key's UTF-8 bytes.
///
/// It names the object's files (`objects/ab/cd/<64 hex>.data`), so the plain key never has to be written to
/// disk. Stored inline as four big-endian words (no allocation), so maps of many ids stay small and fast.
public struct ObjectID: Sendable, Hashable, Comparable, CustomStringConvertible {
  private let words: (UInt64, UInt64, UInt64, UInt64)

  /// The id of `key`: SHA-256 of the key string's UTF-8 bytes.
  public init(_ key: CacheKey) {
    self.init(digest: Array(SHA256.hash(data: Data(key.rawValue.utf8))))
  }

  /// An id from its 32 raw bytes; nil for any other length.
  public init?(bytes: some Collection<UInt8>) {
    guard bytes.count == 32 else { return nil }
    self.init(digest: Array(bytes))
  }

  private init(digest: [UInt8]) {
    func word(_ index: Int) -> UInt64 {
      digest[(index * 8)..<(index * 8 + 8)].reduce(0) { $0 << 8 | UInt64($1) }
    }
    words = (word(0), word(1), word(2), word(3))
  }

  /// An id from 64 lowercase hex digits; nil for anything else.
  public init?(hex: some StringProtocol) {
    var parsed: [UInt64] = []
    parsed.reserveCapacity(4)
    var current: UInt64 = 0
    var count = 0
    for char in hex.utf8 {
      guard let nibble = Self.nibble(char) else { return nil }
      current = current << 4 | UInt64(nibble)
      count += 1
      if count % 16 == 0 {
        parsed.append(current)
        current = 0
      }
      if count > 64 { return nil }
    }
    guard count == 64 else { return nil }
    words = (parsed[0], parsed[1], parsed[2], parsed[3])
  }

  /// The 32 digest bytes.
  public var bytes: [UInt8] {
    var result: [UInt8] = []
    result.reserveCapacity(32)
    for word in [words.0, words.1, words.2, words.3] {
      for shift in stride(from: 56, through: 0, by: -8) {
        result.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
      }
    }
    return result
  }

  /// The 64 lowercase hex digits.
  public var hex: String {
    var chars = [UInt8]()
    chars.reserveCapacity(64)
    for word in [words.0, words.1, words.2, words.3] {
      for shift in stride(from: 60, through: 0, by: -4) {
        chars.append(Self.hexDigits[Int((word >> UInt64(shift)) & 0x0f)])
      }
    }
    return String(decoding: chars, as: UTF8.self)
  }

  /// The two shard directory names: the first and second bytes in hex (`ab`, `cd`).
  public var shardComponents: (String, String) {
    let hex = self.hex
    return (String(hex.prefix(2)), String(hex.dropFirst(2).prefix(2)))
  }

  /// The 64 lowercase hex digits (`hex`), as in file names and reports.
  public var description: String { hex }

  /// Whether the two ids are the same 32 bytes.
  public static func == (lhs: ObjectID, rhs: ObjectID) -> Bool { lhs.words == rhs.words }

  /// Feeds all 32 bytes to `hasher`.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(words.0)
    hasher.combine(words.1)
    hasher.combine(words.2)
    hasher.combine(words.3)
  }

  /// Byte order: the order of the hex names.
  public static func < (lhs: ObjectID, rhs: ObjectID) -> Bool { lhs.words < rhs.words }

  private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

  private static func nibble(_ char: UInt8) -> UInt8? {
    switch char {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): char - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): char - UInt8(ascii: "a") + 10
    default: nil
    }
  }
}

/// In reports and other JSON: the 64 lowercase hex digits, as a string and as a dictionary key.
extension ObjectID: Codable, CodingKeyRepresentable {
  /// Decodes an id from a string of 64 lowercase hex digits. Throws `DecodingError.dataCorrupted` for any
  /// other string.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    let text = try container.decode(String.self)
    guard let id = ObjectID(hex: text) else {
      throw DecodingError.dataCorruptedError(
        in: container, debugDescription: "'\(text)' is not an object id (64 lowercase hex digits)")
    }
    self = id
  }

  /// Encodes the id as a string of 64 lowercase hex digits.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(hex)
  }

  private struct HexKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  /// The id as a dictionary key in JSON: its 64 lowercase hex digits.
  public var codingKey: any CodingKey { HexKey(stringValue: hex) }

  /// The id a JSON dictionary key names; nil unless the key is 64 lowercase hex digits.
  public init?<Key: CodingKey>(codingKey: Key) { self.init(hex: codingKey.stringValue) }
}
