import CFastCRC
import CZlib
import Foundation

/// zlib's CRC-32 (the polynomial used by gzip and PNG), as stored for every chunk and at the end of every
/// manifest.
public enum CRC32 {
  /// The CRC-32 of `bytes`, continuing from `initial` (0 for a fresh checksum).
  ///
  /// The same value as zlib's `crc32_z`, computed by folding with carry-less multiplication on x86-64 CPUs
  /// that have PCLMULQDQ (several times zlib's speed) and by zlib elsewhere (`accelerationLevel`).
  @inlinable
  public static func checksum(_ bytes: UnsafeRawBufferPointer, initial: UInt32 = 0) -> UInt32 {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return initial }
    return mediacache_crc32(initial, base.assumingMemoryBound(to: UInt8.self), bytes.count)
  }

  /// zlib's own `crc32_z`, the reference `checksum` must equal (for tests and benchmarks).
  public static func zlibChecksum(_ bytes: UnsafeRawBufferPointer, initial: UInt32 = 0) -> UInt32 {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return initial }
    return mediacache_crc32_zlib(initial, base.assumingMemoryBound(to: UInt8.self), bytes.count)
  }

  /// What `checksum` runs on this CPU: 0 zlib, 1 PCLMULQDQ folding, 2 AVX-512 VPCLMULQDQ folding.
  public static var accelerationLevel: Int { Int(mediacache_crc32_level()) }

  /// `checksum` limited to the given acceleration level (tests check every path against zlib).
  static func checksum(_ bytes: UnsafeRawBufferPointer, initial: UInt32, level: Int) -> UInt32 {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return initial }
    return mediacache_crc32_at_level(
      Int32(level), initial, base.assumingMemoryBound(to: UInt8.self), bytes.count)
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
