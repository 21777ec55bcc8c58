import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Chunks kept after their CRC check (`VerifiedChunkCache`): found again only for the same file, version and
/// CRC, and bounded.
@Suite struct VerifiedChunkCacheTests {
  static let chunk = 4096

  @Test func keepsTheMostRecentlyUsedWithinItsLimits() {
    let cache = VerifiedChunkCache(costLimit: 4 * Self.chunk, entryLimit: 3)
    func key(_ chunk: Int) -> VerifiedChunkCache.Key {
      .init(file: FileIdentity(device: 1, inode: 2), version: 0, chunk: chunk, crc: UInt32(chunk))
    }
    for index in 0..<3 { cache.insert(Data(repeating: UInt8(index), count: Self.chunk), for: key(index)) }
    #expect(cache.data(for: key(0)) == Data(repeating: 0, count: Self.chunk))  // now the most recent
    cache.insert(Data(repeating: 3, count: Self.chunk), for: key(3))  // over the entry limit: 1 goes
    #expect(cache.data(for: key(1)) == nil)
    #expect(
      cache.data(for: key(0)) != nil && cache.data(for: key(2)) != nil && cache.data(for: key(3)) != nil)
    // Over a quarter of the cost limit: not kept.
    cache.insert(Data(repeating: 9, count: Self.chunk + 1), for: key(9))
    #expect(cache.data(for: key(9)) == nil)
    var other = key(0)
    other.crc = 12345
    #expect(cache.data(for: other) == nil, "another CRC is another chunk")
  }

  /// A part of a chunk read again after the object was reset to new bytes gets the new bytes.
  @Test func aResetObjectNeverGetsKeptBytesOfTheOldVersion() async throws {
    try await withStore { store in
      let id = ObjectID(CacheKey("https://example.com/verified-reset.mp4"))
      let old = randomBytes(count: 2 * Self.chunk, seed: 31)
      let new = randomBytes(count: 2 * Self.chunk, seed: 32)
      let manager = try FileHandleAssetDataManager(store: store, id: id)
      defer { try? manager.close() }
      try manager.setContentLength(Int64(old.count))
      try manager.write(old, at: 0)
      #expect(try manager.read(100..<200) == old[100..<200])
      try manager.reset(contentLength: Int64(new.count), etag: "\"v2\"", lastModified: nil)
      try manager.write(new, at: 0)
      #expect(try manager.read(100..<200) == new[100..<200])
      #expect(try manager.read(0..<Int64(new.count)) == new)
    }
  }

  /// Two stores holding the same bytes under the same key: a chunk kept from one does not hide corruption in
  /// the other (entries are per data file).
  @Test func aChunkKeptFromOneStoreDoesNotHideCorruptionInAnother() async throws {
    try await withStore { first in
      try await withStore { second in
        let id = ObjectID(CacheKey("https://example.com/verified-two-stores.mp4"))
        let data = randomBytes(count: 2 * Self.chunk, seed: 33)
        for store in [first, second] {
          let writer = try FileHandleAssetDataManager(store: store, id: id)
          try writer.setContentLength(Int64(data.count))
          try writer.write(data, at: 0)
          try writer.close()
        }
        let reader = try FileHandleAssetDataManager(store: first, id: id, writable: false)
        #expect(try reader.read(10..<20) == data[10..<20])  // kept
        try reader.close()
        try flipByte(atPath: second.paths(for: id).data, offset: 15)
        let victim = try FileHandleAssetDataManager(store: second, id: id, writable: false)
        defer { try? victim.close() }
        expectStoreError({ _ = try victim.read(10..<20) }) {
          $0.code == .corruptChunk && $0.chunk == 0
        }
      }
    }
  }

  /// What is kept are the bytes that passed the check: a chunk read again soon is not read from disk again, so
  /// damage done on disk since is found by the next check that reads it (a scrub, or once the entry is gone).
  @Test func aKeptChunkServesTheBytesThatWereChecked() async throws {
    try await withStore { store in
      let id = ObjectID(CacheKey("https://example.com/verified-kept.mp4"))
      let data = randomBytes(count: 2 * Self.chunk, seed: 34)
      let writer = try FileHandleAssetDataManager(store: store, id: id)
      try writer.setContentLength(Int64(data.count))
      try writer.write(data, at: 0)
      try writer.close()
      let reader = try FileHandleAssetDataManager(store: store, id: id, writable: false)
      defer { try? reader.close() }
      #expect(try reader.read(0..<100) == data[0..<100])
      try flipByte(atPath: store.paths(for: id).data, offset: 50)
      #expect(try reader.read(0..<100) == data[0..<100], "the checked bytes, never the damaged ones")
      VerifiedChunkCache.shared.removeAll()
      expectStoreError({ _ = try reader.read(0..<100) }) {
        $0.code == .corruptChunk && $0.chunk == 0
      }
    }
  }
}
