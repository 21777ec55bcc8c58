import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// `planVerifiedRead` and `readVerified`: the proxy's reads of cached bytes into its own buffer, checked there,
/// by whole chunks until a chunk has been verified whole, then by the 16 KiB blocks that hold the range
/// (`BlockCRCTable`); with the errors `read(_:)` throws.
@Suite struct VerifiedReadTests {
  static let id = ObjectID(CacheKey("https://example.com/verified-read.mp4"))

  /// `chunks` full chunks and a short last one of 1712 bytes, all written.
  static func written(_ store: ShardedStore, chunkSize: Int, chunks: Int = 3, seed: UInt64 = 21) throws
    -> Data
  {
    let data = randomBytes(count: chunks * chunkSize + 1712, seed: seed)
    let writer = try FileHandleAssetDataManager(store: store, id: id)
    try writer.setContentLength(Int64(data.count))
    try writer.write(data, at: 0)
    try writer.close()
    return data
  }

  /// Plans and reads `range` as the proxy does; returns the plan's extent and the bytes at its offset.
  static func read(_ manager: FileHandleAssetDataManager, _ range: Range<Int64>) throws -> (
    Range<Int64>, Data
  ) {
    let plan = try manager.planVerifiedRead(range)
    #expect(plan.range == range && plan.extent.lowerBound <= range.lowerBound)
    #expect(plan.extent.upperBound >= range.upperBound)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: plan.extent.count, alignment: 16)
    defer { buffer.deallocate() }
    try manager.readVerified(plan, into: buffer)
    return (plan.extent, Data(buffer[plan.offset..<plan.offset + range.count]))
  }

  @Test func smallChunksAreReadWholeIncludingTheShortLastOne() async throws {
    try await withStore(chunkSize: 4096) { store in
      let data = try Self.written(store, chunkSize: 4096)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
      defer { try? manager.close() }
      let expected: [(Range<Int64>, Range<Int64>)] = [
        (100..<4196, 0..<8192), (0..<4096, 0..<4096), (4095..<4097, 0..<8192), (8192..<8193, 8192..<12_288),
        (12_300..<13_000, 12_288..<14_000), (0..<14_000, 0..<14_000),
      ]
      for (range, extent) in expected {
        let (read, bytes) = try Self.read(manager, range)
        #expect(read == extent, "\(range)")
        #expect(bytes == data[Int(range.lowerBound)..<Int(range.upperBound)], "\(range)")
      }
      #expect(manager.wholeChunkExtent(of: 100..<4196) == 0..<8192)
    }
  }

  /// The bytes of the blocks of the chunk starting at `chunkStart` that hold `range` (within that chunk).
  static func blocks(holding range: Range<Int64>, chunkStart: Int64) -> Range<Int64> {
    let block = Int64(BlockCRCTable.blockSize)
    let low = (range.lowerBound - chunkStart) / block * block
    let high = (range.upperBound - chunkStart + block - 1) / block * block
    return chunkStart + low..<chunkStart + high
  }

  @Test func aChunkVerifiedWholeIsThenReadByTheBlocksThatHoldTheRange() async throws {
    #expect(BlockCRCTable.blockSize == 16 << 10)
    let chunk = 256 << 10  // sixteen 16 KiB blocks
    try await withStore(chunkSize: chunk) { store in
      let data = try Self.written(store, chunkSize: chunk)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
      defer { try? manager.close() }
      // Chunk 1 (from 262 144), its blocks 2 to 6 (294 912 to 376 832).
      let range: Range<Int64> = 300_000..<370_000
      let (first, bytes) = try Self.read(manager, range)
      #expect(first == 262_144..<524_288)  // the whole chunk, the first time
      #expect(bytes == data[300_000..<370_000])
      let (second, again) = try Self.read(manager, range)
      #expect(second == 294_912..<376_832)  // five blocks
      #expect(second == Self.blocks(holding: range, chunkStart: 262_144))
      #expect(again == data[300_000..<370_000])
      // Across two chunks: the tail block of chunk 0 is only read once chunk 0 was verified whole too.
      let across: Range<Int64> = 250_000..<270_000
      #expect(try Self.read(manager, across).0 == 0..<278_528)  // chunk 0 whole, chunk 1's first block
      #expect(try Self.read(manager, across) == (245_760..<278_528, data[250_000..<270_000]))
      // The short last chunk (1712 bytes) has one short block.
      let tail: Range<Int64> = Int64(3 * chunk + 100)..<Int64(3 * chunk + 1700)
      _ = try Self.read(manager, tail)
      #expect(try Self.read(manager, tail) == (Int64(3 * chunk)..<Int64(3 * chunk + 1712), data[tail.asInts]))
    }
  }

  @Test func aBadBlockDropsItsChunkAndOnlyTheBlocksReadAreChecked() async throws {
    let chunk = 256 << 10
    try await withStore(chunkSize: chunk) { store in
      let data = try Self.written(store, chunkSize: chunk)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      _ = try Self.read(manager, 0..<10)  // chunk 0 verified whole: its blocks are known
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 200_000)  // chunk 0, block 12
      // A range in block 0 reads block 0 alone: the damage elsewhere is not read, so not seen.
      #expect(try Self.read(manager, 10..<20) == (0..<16_384, data[10..<20]))
      expectStoreError({ _ = try Self.read(manager, 199_990..<200_010) }) {
        $0.code == .corruptChunk && $0.chunk == 0
      }
      #expect(!manager.manifest.isPresent(0) && manager.manifest.isPresent(1))
      expectStoreError({ _ = try Self.read(manager, 10..<20) }) { $0.code == .notCached }
      try manager.close()
      #expect(try store.readManifest(Self.id)?.isPresent(0) == false)
    }
  }

  /// The library's own `read(_:)` reads a chunk between the object's first and last as the proxy does: whole
  /// and checked the first time, then only the blocks that hold the range.
  @Test func readReadsAMiddleChunkWholeOnceThenByItsBlocks() async throws {
    let chunk = 256 << 10
    try await withStore(chunkSize: chunk) { store in
      let data = try Self.written(store, chunkSize: chunk, chunks: 4)
      let path = store.paths(for: Self.id).data
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      // Chunk 1: read (whole) and checked, then damaged in its block 12, which a range in blocks 2 to 3 does
      // not read: still served, from its blocks. A range in block 12 finds the damage and drops the chunk.
      let inChunk1: Range<Int64> = 300_000..<320_000
      #expect(try manager.read(inChunk1) == data[inChunk1.asInts])
      try flipByte(atPath: path, offset: 262_144 + 200_000)
      #expect(try manager.read(inChunk1) == data[inChunk1.asInts])
      expectStoreError({ _ = try manager.read(262_144 + 199_000..<262_144 + 201_000) }) {
        $0.code == .corruptChunk && $0.chunk == 1
      }
      #expect(!manager.manifest.isPresent(1))
      expectStoreError({ _ = try manager.read(inChunk1) }) { $0.code == .notCached }
      // Chunk 2, damaged before any read: its first read checks it whole, so the same kind of range fails.
      try flipByte(atPath: path, offset: 2 * 262_144 + 200_000)
      expectStoreError({ _ = try manager.read(2 * 262_144 + 40_000..<2 * 262_144 + 60_000) }) {
        $0.code == .corruptChunk && $0.chunk == 2
      }
      // Across chunks 2 and 3 after the drop: not cached; across 0 and 1 (an edge): chunk 1 is gone.
      expectStoreError({ _ = try manager.read(3 * 262_144 - 10..<3 * 262_144 + 10) }) {
        $0.code == .notCached
      }
      expectStoreError({ _ = try manager.read(262_144 - 10..<262_144 + 10) }) { $0.code == .notCached }
      // Chunk 3 (not the last: a short fifth chunk follows) across its end into the last one.
      let across: Range<Int64> = 4 * 262_144 - 5000..<4 * 262_144 + 1000
      #expect(try manager.read(across) == data[across.asInts])
    }
  }

  @Test func aBadChunkReadWholeIsDroppedAndNoByteOfItIsReturned() async throws {
    try await withStore(chunkSize: 4096) { store in
      _ = try Self.written(store, chunkSize: 4096)
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 5000)  // chunk 1
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      expectStoreError({ _ = try Self.read(manager, 4000..<4200) }) {
        $0.code == .corruptChunk && $0.chunk == 1
      }
      #expect(!manager.manifest.isPresent(1) && manager.manifest.isPresent(0))
      try manager.close()
    }
  }

  /// An object of three 4 KiB chunks, chunk 0 written whole and `spans` written (spans of chunks 1 and 2),
  /// open for writing.
  static func partial(_ store: ShardedStore, seed: UInt64, spans: [Range<Int>]) throws
    -> (FileHandleAssetDataManager, Data)
  {
    let data = randomBytes(count: 3 * 4096, seed: seed)
    let writer = try FileHandleAssetDataManager(store: store, id: id)
    try writer.setContentLength(Int64(data.count))
    try writer.write(data[0..<4096], at: 0)
    for span in spans { try writer.write(data[span], at: Int64(span.lowerBound)) }
    return (writer, data)
  }

  @Test func spansMissingBytesAndOutOfBoundsRangesThrowAsReadDoes() async throws {
    try await withStore(chunkSize: 4096) { store in
      let (writer, data) = try Self.partial(store, seed: 5, spans: [5000..<6000])  // a span of chunk 1
      // A span is read whole and checked against its CRC, like a chunk, and the range's bytes served from it.
      #expect(try Self.read(writer, 5100..<5200) == (5000..<6000, data[5100..<5200]))
      #expect(try writer.read(5100..<5200) == data[5100..<5200])
      // Chunk 0's bytes of the range are cached, chunk 1's are not (the span starts at 5000).
      expectStoreError({ _ = try Self.read(writer, 4000..<4200) }) { $0.code == .notCached }
      expectStoreError({ _ = try Self.read(writer, 5900..<6100) }) { $0.code == .notCached }
      expectStoreError({ _ = try Self.read(writer, 12_000..<12_289) }) { $0.code == .outOfBounds }
      try writer.close()
    }
  }

  @Test func aRangeAcrossAChunkAndASpanReadsBothAndADamagedSpanIsDropped() async throws {
    try await withStore(chunkSize: 4096) { store in
      // A span at the start of chunk 1, one inside chunk 2.
      let (writer, data) = try Self.partial(store, seed: 6, spans: [4096..<4600, 9000..<9500])
      #expect(try Self.read(writer, 4000..<4300) == (0..<4600, data[4000..<4300]))
      #expect(try Self.read(writer, 9100..<9400) == (9000..<9500, data[9100..<9400]))
      // A byte of the span inside chunk 2 damaged on disk: the read fails, no byte is returned, and the span
      // is dropped (fetched again later); the other span and the chunk stay.
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 9450)
      expectStoreError({ _ = try Self.read(writer, 9100..<9200) }) {
        $0.code == .corruptChunk && $0.chunk == 2
      }
      #expect(writer.manifest.span(containing: 9100) == nil)
      #expect(writer.manifest.span(containing: 4100) != nil && writer.manifest.isPresent(0))
      expectStoreError({ _ = try Self.read(writer, 9100..<9200) }) { $0.code == .notCached }
      #expect(try Self.read(writer, 4096..<4600) == (4096..<4600, data[4096..<4600]))
      try writer.close()
      #expect(try store.readManifest(Self.id)?.span(containing: 9100) == nil)
    }
  }
}

extension Range<Int64> {
  fileprivate var asInts: Range<Int> { Int(lowerBound)..<Int(upperBound) }
}
