import Foundation

/// The pieces of a streamed, verified range read (`FileHandleAssetDataManager.bytes(in:)`).
public struct ChunkReadSequence: AsyncSequence, Sendable {
  /// One piece: the bytes of one chunk that fall inside the range (a chunk's size at most, shorter at the
  /// range's ends), already CRC-verified.
  public typealias Element = Data
  let manager: FileHandleAssetDataManager
  let range: Range<Int64>

  /// An iterator that starts at the range's lower bound. Each iteration reads from the disk again: iterating
  /// twice reads the bytes twice.
  public func makeAsyncIterator() -> Iterator {
    Iterator(manager: manager, cursor: range.lowerBound, end: range.upperBound)
  }

  /// Reads the next chunk when asked, never ahead.
  public struct Iterator: AsyncIteratorProtocol {
    let manager: FileHandleAssetDataManager
    var cursor: Int64
    let end: Int64

    /// Reads and verifies the next piece on `IOExecutor.shared`, or returns nil once the range is exhausted.
    ///
    /// Throws `StoreError.notCached` when the next byte is not cached, `StoreError.outOfBounds` past a known
    /// length, and `StoreError.corruptChunk` when its chunk fails its CRC (the chunk is dropped from the
    /// manifest); the pieces returned before the error were good.
    public mutating func next() async throws -> Data? {
      guard cursor < end else { return nil }
      let (manager, start, end) = (manager, cursor, end)
      let piece = try await IOExecutor.shared.run { try manager.readPiece(startingAt: start, end: end) }
      cursor += Int64(piece.count)
      return piece
    }
  }
}
