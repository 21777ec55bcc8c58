import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// `MediaCache.statistics()`: one walk over real files, every state counted once.
@Suite struct CacheStatisticsTests {
  @Test func countsEveryStateAndSumsBytes() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try MediaCache(
        configuration: MediaCache.Configuration(
          directory: FilePath("\(directory)/cache"), chunkSize: 4096, memoryCostLimit: 0,
          durability: .relaxed,
          maxSize: nil, maxAge: nil))
      #expect(try await cache.statistics() == CacheStatistics())

      // Two complete objects (one pinned), one partial, one with a length but no bytes.
      try await cache.store(randomBytes(count: 10_000, seed: 1), for: "complete-a", policy: .diskOnly)
      try await cache.store(randomBytes(count: 3000, seed: 2), for: "complete-b", policy: .diskOnly)
      try await cache.pin("complete-b")
      let partial = try cache.assetDataManager(for: "partial")
      try partial.setContentLength(20_000)
      try partial.write(randomBytes(count: 8192, seed: 3), at: 4096)
      try partial.close()
      let empty = try cache.assetDataManager(for: "empty")
      try empty.reset(contentLength: 50_000, etag: "\"e\"", lastModified: nil)
      try empty.close()
      // The memory tier is not counted.
      try await cache.store(Data([1, 2, 3]), for: "memory-only", policy: .memoryOnly)

      var statistics = try await cache.statistics()
      var expected = CacheStatistics()
      expected.objects = 4
      expected.complete = 2
      expected.partial = 1
      expected.empty = 1
      expected.pinned = 1
      expected.cachedBytes = 10_000 + 3000 + 8192
      expected.diskBytes = try ["complete-a", "complete-b", "partial", "empty"].reduce(0) {
        $0 + (try cache.store.diskUsage(cache.objectID(for: $1)))
      }
      #expect(expected.diskBytes > expected.cachedBytes)
      #expect(statistics == expected)

      // A corrupt manifest and a data file without a manifest are counted as unreadable, with their bytes.
      let corrupt = cache.store.paths(for: cache.objectID(for: "complete-a"))
      try Data("not a manifest".utf8).write(to: URL(fileURLWithPath: corrupt.manifest))
      let orphan = cache.store.paths(for: CacheKey("orphan").objectID)
      try FileManager.default.createDirectory(atPath: orphan.directory, withIntermediateDirectories: true)
      try randomBytes(count: 5000, seed: 4).write(to: URL(fileURLWithPath: orphan.data))
      statistics = try await cache.statistics()
      #expect(statistics.objects == 5)
      #expect(statistics.unreadable == 2)
      #expect(statistics.complete == 1)
      #expect(statistics.cachedBytes == 3000 + 8192)
      let ids = ["complete-a", "complete-b", "partial", "empty", "orphan"].map { CacheKey($0).objectID }
      #expect(statistics.diskBytes == (try ids.reduce(0) { $0 + (try cache.store.diskUsage($1)) }))
    }
  }
}
