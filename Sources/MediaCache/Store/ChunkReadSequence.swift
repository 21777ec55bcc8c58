import Foundation
import Synchronization

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

  /// Reads one chunk ahead of the one it returns: while the consumer handles a piece, the next is read on
  /// `IOExecutor.shared` (so at most two chunks are in memory per iterator, and the hop to the executor is not
  /// paid in sequence with every piece). A piece's CRC is checked where `next()` runs, before it is returned:
  /// the check is CPU work, not a blocking call, and done there it overlaps the next piece's read instead of
  /// following it on the I/O thread.
  public struct Iterator: AsyncIteratorProtocol {
    let manager: FileHandleAssetDataManager
    var cursor: Int64
    let end: Int64
    /// The piece starting at `cursor`, already being read.
    private var ahead: PieceRead?

    init(manager: FileHandleAssetDataManager, cursor: Int64, end: Int64) {
      self.manager = manager
      self.cursor = cursor
      self.end = end
    }

    /// Reads the next piece on `IOExecutor.shared` and checks it here, or returns nil once the range is
    /// exhausted.
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
        let bytes = try await current.value
        if let check = bytes.check(), !check.passed {
          // The chunk is dropped from the manifest there (a write), and the error thrown.
          let reader = manager.reader
          let _: Void = try await IOExecutor.shared.run { try reader.reject(bytes, check) }
        }
        piece = manager.reader.accept(bytes)
      } catch {
        ahead = nil
        throw error
      }
      cursor += Int64(piece.count)
      if cursor != next {
        // Not the piece expected (cannot happen while pieces end on chunk boundaries): read on from here.
        ahead = nil
      }
      return piece
    }

    private static func read(_ manager: FileHandleAssetDataManager, from start: Int64, end: Int64)
      -> PieceRead
    {
      PieceRead(manager.reader, from: start, end: end)
    }
  }
}

/// A piece being read on `IOExecutor.shared` for an iterator, waited for without a task: the executor's thread
/// resumes the waiting `next()` itself (one hand-over a piece). Like a task's value, it may be awaited any
/// number of times (an iterator copied shares its read ahead). A read nobody waits for any more ends anyway,
/// and its buffer goes back to the pool.
private final class PieceRead: Sendable {
  private enum State {
    /// Read on the executor; these wait for it.
    case reading([CheckedContinuation<UnverifiedBytes, any Error>])
    case read(Result<UnverifiedBytes, any Error>)
  }

  private let state = Mutex(State.reading([]))

  /// Starts the read of the piece at `start` (up to `end`).
  init(_ reader: VerifiedChunkReader, from start: Int64, end: Int64) {
    IOExecutor.shared.submit { [self] in
      let result = Result { try reader.unverifiedPiece(startingAt: start, end: end) }
      let waiting = state.withLock { state -> [CheckedContinuation<UnverifiedBytes, any Error>] in
        defer { state = .read(result) }
        guard case .reading(let waiting) = state else { return [] }
        return waiting
      }
      for waiter in waiting { waiter.resume(with: result) }
    }
  }

  /// The piece read (or the read's error), once it is there.
  var value: UnverifiedBytes {
    get async throws {
      try await withCheckedThrowingContinuation { waiter in
        let ready = state.withLock { state -> Result<UnverifiedBytes, any Error>? in
          switch state {
          case .read(let result): return result
          case .reading(let waiting): state = .reading(waiting + [waiter])
          }
          return nil
        }
        if let ready { waiter.resume(with: ready) }
      }
    }
  }
}
