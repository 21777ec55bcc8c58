import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// `FileHandleAssetDataManager.readWholeChunks(_:into:)`: the whole chunks holding a range read into the
/// caller's buffer and checked there (what the proxy sends a slice of), with the errors `read(_:)` throws.
@Suite struct WholeChunkReadTests {
  static let chunk = 4096
  static let id = ObjectID(CacheKey("https://example.com/whole-chunks.mp4"))

  /// 3 full chunks and a short last one (14 000 bytes), all written.
  static func written(_ store: ShardedStore, seed: UInt64 = 21) throws -> Data {
    let data = randomBytes(count: 3 * chunk + 1712, seed: seed)
    let writer = try FileHandleAssetDataManager(store: store, id: id)
    try writer.setContentLength(Int64(data.count))
    try writer.write(data, at: 0)
    try writer.close()
    return data
  }

  /// Reads `range` the way the proxy does; returns the bytes at the offset returned.
  static func read(_ manager: FileHandleAssetDataManager, _ range: Range<Int64>) throws -> Data {
    let extent = manager.wholeChunkExtent(of: range)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: extent.count, alignment: 16)
    defer { buffer.deallocate() }
    let offset = try manager.readWholeChunks(range, into: buffer)
    #expect(Int64(offset) == range.lowerBound - extent.lowerBound)
    return Data(buffer[offset..<offset + range.count])
  }

  @Test func anUnalignedRangeReadsTheTwoChunksItTouchesAndTheShortLastChunkToo() async throws {
    try await withStore(chunkSize: Self.chunk) { store in
      let data = try Self.written(store)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
      defer { try? manager.close() }
      #expect(manager.wholeChunkExtent(of: 100..<4196) == 0..<8192)
      #expect(manager.wholeChunkExtent(of: 8192..<8193) == 8192..<12_288)
      #expect(manager.wholeChunkExtent(of: 13_000..<14_000) == 12_288..<14_000)
      for range: Range<Int64> in [
        100..<4196, 0..<4096, 4095..<4097, 8192..<8193, 12_000..<14_000, 0..<14_000,
      ] {
        #expect(
          try Self.read(manager, range) == data[Int(range.lowerBound)..<Int(range.upperBound)], "\(range)")
      }
    }
  }

  @Test func aCorruptChunkIsDroppedAndNoByteOfItIsReturned() async throws {
    try await withStore(chunkSize: Self.chunk) { store in
      _ = try Self.written(store)
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 5000)  // chunk 1
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      expectStoreError({ _ = try Self.read(manager, 4000..<4200) }) {
        $0.code == .corruptChunk && $0.chunk == 1
      }
      #expect(!manager.manifest.isPresent(1) && manager.manifest.isPresent(0))
      expectStoreError({ _ = try Self.read(manager, 4000..<4200) }) { $0.code == .notCached }
      #expect(try Self.read(manager, 0..<100).count == 100)
      try manager.close()
      #expect(try store.readManifest(Self.id)?.isPresent(1) == false)
    }
  }

  @Test func spansMissingBytesAndOutOfBoundsRangesThrowAsReadDoes() async throws {
    try await withStore(chunkSize: Self.chunk) { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 5)
      let writer = try FileHandleAssetDataManager(store: store, id: Self.id)
      try writer.setContentLength(Int64(data.count))
      try writer.write(data[0..<Self.chunk], at: 0)
      try writer.write(data[5000..<6000], at: 5000)  // a span of chunk 1
      // A span is served by read(_:), not here.
      expectStoreError({ _ = try Self.read(writer, 5100..<5200) }) { $0.code == .notCached }
      #expect(try writer.read(5100..<5200) == data[5100..<5200])
      expectStoreError({ _ = try Self.read(writer, 4000..<4200) }) { $0.code == .notCached }
      expectStoreError({ _ = try Self.read(writer, 12_000..<12_289) }) { $0.code == .outOfBounds }
      try writer.close()
    }
  }
}
