import Foundation

/// The pieces of a streamed, verified range read (`FileHandleAssetDataManager.bytes(in:)`).
public struct ChunkReadSequence: AsyncSequence, Sendable {
  public typealias Element = Data
  let manager: FileHandleAssetDataManager
  let range: Range<Int64>

  public func makeAsyncIterator() -> Iterator {
    Iterator(manager: manager, cursor: range.lowerBound, end: range.upperBound)
  }

  /// Reads the next chunk when asked, never ahead.
  public struct Iterator: AsyncIteratorProtocol {
    let manager: FileHandleAssetDataManager
    var cursor: Int64
    let end: Int64

    public mutating func next() async throws -> Data? {
      guard cursor < end else { return nil }
      let (manager, start, end) = (manager, cursor, end)
      let piece = try await IOExecutor.shared.run { try manager.readPiece(startingAt: start, end: end) }
      cursor += Int64(piece.count)
      return piece
    }
  }
}
