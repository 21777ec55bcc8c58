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
    return ChunkCheck(range, expected: expected, checking: UnsafeRawBufferPointer(rebasing: target[..<count]))
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

extension ChunkCheck {
  /// The check of `bytes`, read from `range` (fewer bytes than `range.count` when the file was short), against
  /// `expected`: for a read that was made apart from its check (`UnverifiedBytes`).
  init(_ range: Range<Int64>, expected: UInt32, checking bytes: UnsafeRawBufferPointer) {
    self.init(range: range, expected: expected, bytesRead: bytes.count, actual: CRC32.checksum(bytes))
  }

  /// Checks chunk bytes already read into `bytes` (the whole chunk, `range`) against `expected`, computing the
  /// CRC of each `blockSize` block and combining them into the chunk's: on a pass, returns the block CRCs
  /// (`BlockCRCTable`); nil when the chunk fails. The bytes are read once, by the caller.
  static func blocks(
    of bytes: UnsafeRawBufferPointer, range: Range<Int64>, expected: UInt32, blockSize: Int
  ) -> (check: ChunkCheck, blocks: [UInt32]?) {
    var blocks: [UInt32] = []
    blocks.reserveCapacity((bytes.count + blockSize - 1) / blockSize)
    var combined: UInt32 = 0
    var start = 0
    while start < bytes.count {
      let end = min(start + blockSize, bytes.count)
      let crc = CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
      blocks.append(crc)
      combined = start == 0 ? crc : CRC32.combine(combined, crc, lengthOfB: Int64(end - start))
      start = end
    }
    let check = ChunkCheck(range: range, expected: expected, bytesRead: bytes.count, actual: combined)
    return (check, check.passed ? blocks : nil)
  }

  /// Checks `bytes`, read from `range` of a chunk starting at `chunkStart` whose block CRCs are `blocks`:
  /// `range` starts on a block boundary and ends on one or at the chunk's end. Returns whether every block
  /// matches.
  static func blocksMatch(
    _ bytes: UnsafeRawBufferPointer, range: Range<Int64>, chunkStart: Int64, blocks: [UInt32], blockSize: Int
  ) -> Bool {
    var start = 0
    var index = Int((range.lowerBound - chunkStart) / Int64(blockSize))
    while start < bytes.count {
      let end = min(start + blockSize, bytes.count)
      guard index < blocks.count,
        CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) == blocks[index]
      else { return false }
      start = end
      index += 1
    }
    return true
  }
}
