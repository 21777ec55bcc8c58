import Crypto
import Foundation

/// The identity of a cached object: the SHA-256 of its cache key's UTF-8 bytes.
///
/// It names the object's files (`objects/ab/cd/<64 hex>.data`), so the plain key never has to be written to
/// disk.
public struct ObjectID: Sendable, Hashable, Comparable, CustomStringConvertible {
  /// The 32 digest bytes.
  public let bytes: [UInt8]

  /// The id of `key`: SHA-256 of the key string's UTF-8 bytes.
  public init(_ key: CacheKey) {
    bytes = Array(SHA256.hash(data: Data(key.rawValue.utf8)))
  }

  /// An id from its 32 raw bytes; nil for any other length.
  public init?(bytes: some Collection<UInt8>) {
    guard bytes.count == 32 else { return nil }
    self.bytes = Array(bytes)
  }

  /// An id from 64 lowercase hex digits; nil for anything else.
  public init?(hex: some StringProtocol) {
    let utf8 = Array(hex.utf8)
    guard utf8.count == 64 else { return nil }
    var result = [UInt8]()
    result.reserveCapacity(32)
    var index = 0
    while index < 64 {
      guard let high = Self.nibble(utf8[index]), let low = Self.nibble(utf8[index + 1]) else { return nil }
      result.append(high << 4 | low)
      index += 2
    }
    bytes = result
  }

  /// The 64 lowercase hex digits.
  public var hex: String {
    var chars = [UInt8]()
    chars.reserveCapacity(64)
    for byte in bytes {
      chars.append(Self.hexDigits[Int(byte >> 4)])
      chars.append(Self.hexDigits[Int(byte & 0x0f)])
    }
    return String(decoding: chars, as: UTF8.self)
  }

  /// The two shard directory names: the first and second bytes in hex (`ab`, `cd`).
  public var shardComponents: (String, String) {
    let hex = self.hex
    let first = hex.prefix(2)
    let second = hex.dropFirst(2).prefix(2)
    return (String(first), String(second))
  }

  public var description: String { hex }

  public static func < (lhs: ObjectID, rhs: ObjectID) -> Bool {
    lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
  }

  private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

  private static func nibble(_ char: UInt8) -> UInt8? {
    switch char {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): char - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): char - UInt8(ascii: "a") + 10
    default: nil
    }
  }
}
