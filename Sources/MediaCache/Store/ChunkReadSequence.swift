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

  /// Reads one chunk ahead of the one it returns: while the consumer handles a piece, the next is read and
  /// verified on `IOExecutor.shared` (so at most two chunks are in memory per iterator, and the hop to the
  /// executor is not paid in sequence with every piece).
  public struct Iterator: AsyncIteratorProtocol {
    let manager: FileHandleAssetDataManager
    var cursor: Int64
    let end: Int64
    /// The piece starting at `cursor`, already being read.
    private var ahead: Task<Data, any Error>?

    init(manager: FileHandleAssetDataManager, cursor: Int64, end: Int64) {
      self.manager = manager
      self.cursor = cursor
      self.end = end
    }

    /// Reads and verifies the next piece on `IOExecutor.shared`, or returns nil once the range is exhausted.
    ///
    /// Throws `StoreError.notCached` when the next byte is not cached, `StoreError.outOfBounds` past a known
    /// length, and `StoreError.corruptChunk` when its chunk fails its CRC (the chunk is dropped from the
    /// manifest); the pieces returned before the error were good.
    public mutating func next() async throws -> Data? {
      guard cursor < end else { return nil }
      let current = ahead ?? Self.read(manager, from: cursor, end: end)
      ahead = nil
      // Pieces end on chunk boundaries: the next one starts at the next boundary, known before this one is read.
      let chunkSize = Int64(manager.chunkSize)
      let next = Swift.min(end, (cursor / chunkSize + 1) * chunkSize)
      if next < end { ahead = Self.read(manager, from: next, end: end) }
      let piece: Data
      do {
        piece = try await current.value
      } catch {
        ahead?.cancel()
        ahead = nil
        throw error
      }
      cursor += Int64(piece.count)
      if cursor != next {
        // Not the piece expected (cannot happen while pieces end on chunk boundaries): read on from here.
        ahead?.cancel()
        ahead = nil
      }
      return piece
    }

    private static func read(_ manager: FileHandleAssetDataManager, from start: Int64, end: Int64) -> Task<
      Data, any Error
    > {
      Task { try await IOExecutor.shared.run { try manager.readPiece(startingAt: start, end: end) } }
    }
  }
}
