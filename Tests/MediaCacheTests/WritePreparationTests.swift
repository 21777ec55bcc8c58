import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

#if canImport(Glibc)
  import Glibc

  /// `FileHandleAssetDataManager.prepareForWriting(chunk:)`: a chunk about to be written is read into the page
  /// cache (so the kernel gives it large folios, docs/PERFORMANCE.md), without writing a byte or allocating a
  /// block, and only where that can gain something. The temporary directory is on a disk file system, whose
  /// page cache holds the pages of a hole once read (as the page-cache tests of `ImmediateHitTests` assume).
  @Suite struct WritePreparationTests {
    static let chunk = 64 << 10
    static let id = ObjectID(CacheKey("https://example.com/prepared.mp4"))

    static func allocatedBlocks(_ path: String) throws -> Int {
      var status = stat()
      try #require(stat(path, &status) == 0, "stat: errno \(errno)")
      return Int(status.st_blocks)
    }

    static func pages(_ range: Range<Int64>) -> Int { Int(range.count) / Int(sysconf(Int32(_SC_PAGESIZE))) }

    @Test func aHoleAboutToBeWrittenIsReadIntoThePageCacheWithoutWritingIt() async throws {
      try await withStore(chunkSize: Self.chunk) { store in
        let data = randomBytes(count: 4 * Self.chunk, seed: 11)
        let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
        try manager.setContentLength(Int64(data.count))
        try manager.write(data[0..<100], at: 0)
        let path = store.paths(for: Self.id).data
        try dropPageCache(path)
        let second = Int64(Self.chunk)..<Int64(2 * Self.chunk)
        #expect(try residentPages(path, second) == 0)
        let blocks = try Self.allocatedBlocks(path)
        manager.prepareForWriting(chunk: 1)
        #expect(try residentPages(path, second) == Self.pages(second))
        #expect(try Self.allocatedBlocks(path) == blocks)
        #expect(try manager.read(0..<100) == data[0..<100])
        // The writes that follow, in the uneven pieces an origin's body comes in, store the right bytes.
        for start in stride(from: 100, to: data.count, by: 1771) {
          try manager.write(data[start..<min(data.count, start + 1771)], at: Int64(start))
        }
        try manager.close()
        let reader = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
        defer { try? reader.close() }
        #expect(try reader.read(0..<Int64(data.count)) == data)
        #expect(try store.readManifest(Self.id)?.isComplete == true)
      }
    }

    @Test func chunksPresentOrHeldByReadOnlyOrClosedHandlesAreLeftAlone() async throws {
      try await withStore(chunkSize: Self.chunk) { store in
        let data = randomBytes(count: 4 * Self.chunk, seed: 12)
        let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
        try manager.setContentLength(Int64(data.count))
        try manager.write(data[0..<Self.chunk], at: 0)
        try manager.flush()
        let path = store.paths(for: Self.id).data
        let first = Int64(0)..<Int64(Self.chunk)
        let third = Int64(2 * Self.chunk)..<Int64(3 * Self.chunk)
        try #require(
          try dropPageCache(path, until: first), "the present chunk's pages stayed in the page cache")
        // A present chunk: its bytes are on disk; reading them here would be a read for nothing.
        manager.prepareForWriting(chunk: 0)
        #expect(try residentPages(path, first) == 0)
        // Past the object's length: nothing to ready.
        manager.prepareForWriting(chunk: 4)
        manager.prepareForWriting(chunk: -1)
        // A read-only handle writes nothing.
        let reader = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
        reader.prepareForWriting(chunk: 2)
        #expect(try residentPages(path, third) == 0)
        try reader.close()
        // A closed handle: nothing, and no error.
        try manager.close()
        manager.prepareForWriting(chunk: 2)
        #expect(try residentPages(path, third) == 0)
        #expect(try fileBytes(path).prefix(Self.chunk) == data.prefix(Self.chunk))
      }
    }
  }
#endif
