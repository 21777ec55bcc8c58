import CZlib
import Foundation

/// zlib's CRC-32 (the polynomial used by gzip and PNG), as stored for every chunk and at the end of every
/// manifest.
public enum CRC32 {
  /// The CRC-32 of `bytes`, continuing from `initial` (0 for a fresh checksum).
  ///
  /// The corresponding C function is `crc32_z`.
  @inlinable
  public static func checksum(_ bytes: UnsafeRawBufferPointer, initial: UInt32 = 0) -> UInt32 {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return initial }
    return UInt32(
      truncatingIfNeeded: crc32_z(
        UInt(initial), base.assumingMemoryBound(to: UInt8.self), Int(bytes.count)))
  }

  /// The CRC-32 of `data`, continuing from `initial`.
  public static func checksum(_ data: some ContiguousBytes, initial: UInt32 = 0) -> UInt32 {
    data.withUnsafeBytes { checksum($0, initial: initial) }
  }

  /// The CRC-32 of the concatenation A‖B, given the CRC of A, the CRC of B and the length of B.
  ///
  /// The corresponding C function is `crc32_combine`.
  public static func combine(_ crcA: UInt32, _ crcB: UInt32, lengthOfB: Int64) -> UInt32 {
    UInt32(truncatingIfNeeded: crc32_combine(UInt(crcA), UInt(crcB), off_t(lengthOfB)))
  }
}
