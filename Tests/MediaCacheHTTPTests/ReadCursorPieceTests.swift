import MediaCache
import Testing

@testable import MediaCacheHTTP

/// Where a piece smaller than what is cached from its start ends (`ReadCursor.piece(of:atMost:)`).
@Suite struct ReadCursorPieceTests {
  static let block = Int64(FileHandleAssetDataManager.verificationBlockSize)

  @Test func aSmallPieceEndsOnABlockBoundarySoTheNextStartsOnOne() {
    let whole: Range<Int64> = 1000..<(1 << 20)
    // Unaligned start: cut back to the block boundary below its end, then whole blocks from there on.
    let first = ReadCursor.piece(of: whole, atMost: 32 << 10)
    #expect(first == 1000..<(2 * Self.block))
    let second = ReadCursor.piece(of: first.upperBound..<whole.upperBound, atMost: 32 << 10)
    #expect(second == (2 * Self.block)..<(4 * Self.block))
    // A limit of less than what reaches the next boundary: not cut to nothing.
    #expect(ReadCursor.piece(of: whole, atMost: 100) == 1000..<1100)
    // What is cached ends first: all of it, uncut.
    #expect(ReadCursor.piece(of: 0..<40_000, atMost: 32 << 10) == 0..<(2 * Self.block))
    #expect(ReadCursor.piece(of: 0..<30_000, atMost: 32 << 10) == 0..<30_000)
    #expect(ReadCursor.piece(of: whole, atMost: .max) == whole)
  }
}
