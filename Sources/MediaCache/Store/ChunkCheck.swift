/// The one check between the disk and anyone who uses a chunk's bytes: the chunk is read whole and its CRC-32
/// compared with the one its manifest lists (invariant 1). Reads (`FileHandleAssetDataManager`), the
/// compactor's scrub (`ShardedStore.scrub`) and `cache-fsck` (`CacheChecker`) all check chunks through it, so
/// a short read or a mismatch means the same thing everywhere.
struct ChunkCheck: Sendable, Equatable {
  /// The chunk's bytes in the object.
  let range: Range<Int64>
  /// The CRC-32 the manifest lists.
  let expected: UInt32
  /// Bytes the read returned (fewer than `range.count` when the data file is short).
  let bytesRead: Int
  /// CRC-32 of the bytes read.
  let actual: UInt32

  /// Whether the whole chunk was read and its CRC matches.
  var passed: Bool { bytesRead == range.count && actual == expected }

  /// Reads `range` of `file` into `buffer` (at least `range.count` bytes) and checks it against `expected`.
  /// Throws what the read throws.
  static func read(
    _ range: Range<Int64>, expected: UInt32, from file: SystemFile, into buffer: UnsafeMutableRawBufferPointer
  ) throws -> ChunkCheck {
    let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(range.count)])
    let count = try file.read(into: target, at: range.lowerBound)
    let actual = CRC32.checksum(UnsafeRawBufferPointer(rebasing: target[..<count]))
    return ChunkCheck(range: range, expected: expected, bytesRead: count, actual: actual)
  }
}

/// Checks the present chunks and spans of objects one after another through one buffer of a chunk's size (the
/// scrub and `cache-fsck`).
final class ChunkVerifier {
  private var buffer: UnsafeMutableRawBufferPointer

  init(chunkSize: Int) {
    buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(chunkSize, 1), alignment: 64)
  }

  deinit { buffer.deallocate() }

  /// Reads `span` (bytes of an incomplete chunk) from `file` and checks it against its CRC. Throws what the
  /// read throws.
  func check(_ span: Manifest.Span, in file: SystemFile) throws -> ChunkCheck {
    if buffer.count < span.range.count {
      buffer.deallocate()
      buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(span.range.count), alignment: 64)
    }
    return try ChunkCheck.read(span.range, expected: span.crc, from: file, into: buffer)
  }

  /// Reads present chunk `index` of `manifest` from `file` and checks it. Throws what the read throws.
  func check(_ index: Int, of manifest: Manifest, in file: SystemFile) throws -> ChunkCheck {
    guard let expected = manifest.crc(ofChunk: index) else {
      preconditionFailure("chunk \(index) is not present in the manifest")
    }
    if buffer.count < manifest.chunkSize {
      buffer.deallocate()
      buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: manifest.chunkSize, alignment: 64)
    }
    return try ChunkCheck.read(
      manifest.byteRange(ofChunk: index), expected: expected, from: file, into: buffer)
  }
}
