import Foundation

@testable import MediaCache

// Raw manifest bytes for the decoder tests: mutate the body of an encoding, then give it a valid CRC again.

/// Replaces the last four bytes of a manifest with the CRC-32 of the bytes before them, so that a mutated
/// manifest gets past the checksum and reaches the field checks.
func withRecomputedCRC(_ body: some Collection<UInt8>) -> Data {
  var bytes = Array(body)
  let crc = CRC32.checksum(bytes)
  withUnsafeBytes(of: crc.littleEndian) { bytes.append(contentsOf: $0) }
  return Data(bytes)
}

/// `manifest`'s encoding with its trailing CRC removed: the body a test mutates before `withRecomputedCRC`.
func encodedBody(_ manifest: Manifest) throws -> [UInt8] {
  Array(try ManifestCodec.encode(manifest).dropLast(4))
}

/// Byte offsets of the fixed header fields of an encoded manifest (docs/FORMAT.md).
enum HeaderOffset {
  static let major = 4
  static let minor = 5
  static let flags = 6
  static let objectID = 8
  static let contentLength = 40
  static let chunkSize = 48
  static let versionTag = 52
  static let createdAt = 56
  static let runCount = 64
  static let presentCount = 68
  static let firstRun = 72
}

/// Writes `value` little-endian at `offset` of `bytes`.
func poke<T: FixedWidthInteger>(_ value: T, at offset: Int, in bytes: inout [UInt8]) {
  withUnsafeBytes(of: value.littleEndian) { raw in
    for (index, byte) in raw.enumerated() { bytes[offset + index] = byte }
  }
}
