/// What a verified read of a range will read and check (`FileHandleAssetDataManager.planVerifiedRead(_:)`):
/// per chunk it touches, either the whole chunk against the manifest's CRC, or only the 16 KiB blocks that
/// hold bytes of the range against the block CRCs of `BlockCRCTable`, or, for a chunk that is not complete, the
/// span holding its bytes of the range, whole, against the span's CRC. The bytes read are contiguous
/// (`extent`), so one buffer of `extent.count` bytes takes them, and the range starts `offset` bytes into it.
package struct VerifiedReadPlan: Sendable {
  /// One chunk's part of the read.
  struct Segment: Sendable {
    /// The chunk's index.
    var chunk: Int
    /// The chunk's bytes in the object.
    var chunkBytes: Range<Int64>
    /// The bytes read of it: the whole chunk, or the blocks that hold bytes of the range.
    var bytes: Range<Int64>
    /// The chunk's CRC in the manifest.
    var crc: UInt32
    /// Its block CRCs when only blocks are read.
    var blocks: [UInt32]?
    /// Set when the chunk is not complete and its bytes of the range are in this span: `chunkBytes` and
    /// `bytes` are then the span's, read whole and checked against its CRC (`crc`), as `read(_:)` checks it.
    var span: Manifest.Span?
  }

  /// The bytes asked for.
  package let range: Range<Int64>
  /// The bytes read: from the first segment's start to the last one's end.
  package let extent: Range<Int64>
  let segments: [Segment]
  /// The object's version when planned.
  let version: UInt32
  /// The object's chunk size.
  let chunkSize: Int

  /// Where `range` starts in the buffer the read fills.
  package var offset: Int { Int(range.lowerBound - extent.lowerBound) }
}
