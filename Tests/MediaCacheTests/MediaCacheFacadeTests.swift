import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

@Suite struct MediaCacheFacadeTests {
  static let url = "https://example.com/video.mp4"

  /// Runs `body` with a cache in a fresh temporary directory (chunk size 4096).
  static func withCache<T>(
    memoryCostLimit: Int = 1 << 20, _ body: (MediaCache, String) async throws -> T
  ) async throws -> T {
    try await withTemporaryDirectory { directory in
      let root = "\(directory)/cache"
      let cache = try MediaCache(
        configuration: .init(directory: FilePath(root), chunkSize: 4096, memoryCostLimit: memoryCostLimit))
      return try await body(cache, root)
    }
  }

  @Test(arguments: MediaCache.StoragePolicy.allCases)
  func storeAndReadBack(_ policy: MediaCache.StoragePolicy) async throws {
    try await Self.withCache { cache, root in
      let data = randomBytes(count: 10_000, seed: 41)
      let id = cache.objectID(for: Self.url)
      try await cache.store(data, for: Self.url, policy: policy)
      #expect(try await cache.data(for: Self.url, policy: policy) == data)

      let inMemory = cache.memory.data(for: id) != nil
      let onDisk = try cache.store.readManifest(id) != nil
      #expect(inMemory == (policy != .diskOnly))
      #expect(onDisk == (policy != .memoryOnly))
      // A new cache on the same directory (a new process) finds exactly what was put on disk.
      let reopened = try MediaCache(configuration: .init(directory: FilePath(root), chunkSize: 4096))
      #expect(try await reopened.data(for: Self.url) == (onDisk ? data : nil))
    }
  }

  /// `withAssetData` commits what the body wrote and releases the in-use lock, also when the body throws; a
  /// manager dropped without `close()` commits nothing (its deinitialiser may run on an event loop).
  @Test func withAssetDataClosesAndADroppedManagerCommitsNothing() async throws {
    try await Self.withCache { cache, _ in
      let data = randomBytes(count: 10_000, seed: 43)
      let id = cache.objectID(for: Self.url)
      try await IOExecutor.shared.run {
        try cache.withAssetData(for: Self.url) { video in
          try video.setContentLength(Int64(data.count))
          try video.write(data, at: 0)
        }
      }
      #expect(try await cache.status(for: Self.url) == .complete(length: Int64(data.count)))
      #expect(try cache.store.isBusy(id) == false)

      struct Stop: Error {}
      let other = "https://example.com/other.mp4"
      await #expect(throws: Stop.self) {
        try await IOExecutor.shared.run {
          try cache.withAssetData(for: other) { video in
            try video.setContentLength(8192)
            try video.write(data.prefix(8192), at: 0)
            throw Stop()
          }
        }
      }
      // Closed anyway: its completed chunks are committed and nobody holds the object.
      #expect(try cache.store.isBusy(cache.objectID(for: other)) == false)
      #expect(try cache.store.readManifest(cache.objectID(for: other))?.isComplete == true)

      let dropped = "https://example.com/dropped.mp4"
      try await IOExecutor.shared.run {
        let video = try cache.assetDataManager(for: dropped)
        try video.setContentLength(4096)
        try video.write(data.prefix(4096), at: 0)
      }
      #expect(try cache.store.isBusy(cache.objectID(for: dropped)) == false)
      #expect(try cache.store.readManifest(cache.objectID(for: dropped)) == nil)
    }
  }

  @Test func storeReplacesAnEarlierVersionWithMetadata() async throws {
    try await Self.withCache { cache, root in
      try await cache.store(randomBytes(count: 20_000, seed: 42), for: Self.url, contentType: "video/mp4")
      let newer = randomBytes(count: 5_000, seed: 43)
      try await cache.store(newer, for: Self.url, policy: .diskOnly, userMetadata: Data("meta".utf8))
      #expect(try await cache.data(for: Self.url) == newer)
      let manifest = try #require(try await cache.manifest(for: Self.url))
      #expect(manifest.contentLength == 5_000)
      #expect(manifest.contentType == nil)
      #expect(manifest.userMetadata == Data("meta".utf8))
      #expect(try fileBytes(cache.store.paths(for: cache.objectID(for: Self.url)).data) == newer)
    }
  }

  @Test func readingFromDiskPromotesToMemory() async throws {
    try await Self.withCache { cache, _ in
      let data = randomBytes(count: 9_000, seed: 44)
      let id = cache.objectID(for: Self.url)
      try await cache.store(data, for: Self.url, policy: .diskOnly)
      #expect(cache.memory.data(for: id) == nil)
      #expect(try await cache.data(for: Self.url, policy: .diskOnly) == data)
      #expect(cache.memory.data(for: id) == nil, "a disk-only read does not fill memory")
      #expect(try await cache.data(for: Self.url) == data)
      #expect(cache.memory.data(for: id) == data)
      // From now on memory answers, even with the disk copy gone.
      try FileManager.default.removeItem(atPath: cache.store.paths(for: id).manifest)
      #expect(try await cache.data(for: Self.url, policy: .memoryOnly) == data)
    }
  }

  @Test func statusAndPercentFollowTheCachedChunks() async throws {
    try await Self.withCache { cache, _ in
      #expect(try await cache.status(for: Self.url) == .none)
      #expect(MediaCache.Status.none.percent == 0)
      let data = randomBytes(count: 5 * 4096 + 904, seed: 45)  // 21_384 bytes, 6 chunks
      let manager = try cache.assetDataManager(for: Self.url)
      try manager.setContentLength(Int64(data.count))
      try manager.write(data[0..<4096], at: 0)
      try manager.write(data[8192..<12_288], at: 8192)
      try manager.write(data[20_480...], at: 20_480)  // the short last chunk
      try manager.flush()

      let partial = try await cache.status(for: Self.url)
      #expect(
        partial
          == .partial(cachedBytes: 9_096, length: 21_384, ranges: [0..<4096, 8192..<12_288, 20_480..<21_384]))
      #expect(abs(partial.percent - 9_096.0 * 100 / 21_384) < 1e-9)
      #expect(try await cache.fileURL(for: Self.url) == nil, "no file for a partial object")
      #expect(try await cache.data(for: Self.url) == nil, "no whole-object data for a partial object")

      try manager.write(data, at: 0)
      try manager.close()
      let complete = try await cache.status(for: Self.url)
      #expect(complete == .complete(length: 21_384))
      #expect(complete.percent == 100)
      let file = try #require(try await cache.fileURL(for: Self.url))
      #expect(try Data(contentsOf: file) == data)
    }
  }

  @Test func aFileURLCarriesItsContentTypesExtensionWithoutACopy() async throws {
    try await Self.withCache { cache, _ in
      let data = randomBytes(count: 30_000, seed: 9)
      try await cache.store(data, for: "clip", policy: .diskOnly, contentType: "video/MP4; codecs=avc1")
      let id = cache.objectID(for: "clip")
      let file = try #require(try await cache.fileURL(for: "clip"))
      #expect(file.path == "\(cache.store.root)/files/\(id.hex).mp4")
      #expect(try Data(contentsOf: file) == data)
      let target = try FileManager.default.destinationOfSymbolicLink(atPath: file.path)
      #expect(target.hasPrefix("../objects/") && target.hasSuffix("\(id.hex).data"), "a link, not a copy")
      #expect(try await cache.fileURL(for: "clip") == file, "the same link again")
      // An unknown type: the data file itself. No CheckFinding for the links.
      try await cache.store(data, for: "blob", policy: .diskOnly, contentType: "application/x-unknown")
      #expect(
        try await cache.fileURL(for: "blob")?.path == cache.store.paths(for: cache.objectID(for: "blob")).data
      )
      #expect(try CacheChecker(root: FilePath(cache.store.root)).run().findings.isEmpty)
      // Removed: the link dangles until a compaction pass unlinks it.
      try await cache.remove("clip")
      #expect(!FileManager.default.fileExists(atPath: file.path))
      #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: file.path)) != nil)
      _ = try await cache.purge()
      #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: file.path)) == nil)
    }
  }

  @Test func statusOfAnUnknownLengthAndOfMemoryOnlyObjects() async throws {
    try await Self.withCache { cache, _ in
      let manager = try cache.assetDataManager(for: Self.url)
      try manager.write(randomBytes(count: 4096, seed: 46), at: 0)
      try manager.close()
      let status = try await cache.status(for: Self.url)
      #expect(status == .partial(cachedBytes: 4096, length: nil, ranges: [0..<4096]))
      #expect(status.percent == 0)

      try await cache.store(Data(count: 77), for: "memory-only", policy: .memoryOnly)
      #expect(try await cache.status(for: "memory-only") == .complete(length: 77))
      #expect(try await cache.fileURL(for: "memory-only") == nil)
    }
  }

  @Test func removeReturnsTheBytesFreed() async throws {
    try await Self.withCache { cache, _ in
      let data = randomBytes(count: 50_000, seed: 47)
      try await cache.store(data, for: Self.url)
      let id = cache.objectID(for: Self.url)
      let paths = cache.store.paths(for: id)
      let expected = try cache.store.diskUsage(id)
      #expect(expected >= Int64(data.count))
      #expect(try await cache.remove(Self.url) == expected)
      #expect(!FileManager.default.fileExists(atPath: paths.data))
      #expect(!FileManager.default.fileExists(atPath: paths.manifest))
      #expect(!FileManager.default.fileExists(atPath: paths.outerShard), "empty shard directories go too")
      #expect(try await cache.status(for: Self.url) == .none)
      #expect(try await cache.data(for: Self.url) == nil)
      #expect(try await cache.remove(Self.url) == 0)
    }
  }

  @Test func removeAllSkipsObjectsInUse() async throws {
    try await Self.withCache { cache, _ in
      let a = randomBytes(count: 10_000, seed: 48)
      let b = randomBytes(count: 3_000, seed: 49)
      try await cache.store(a, for: "a")
      try await cache.store(b, for: "b", policy: .diskOnly)
      try await cache.store(Data(count: 500), for: "busy", policy: .diskOnly)
      let usage =
        try cache.store.diskUsage(cache.objectID(for: "a")) + cache.store.diskUsage(cache.objectID(for: "b"))
      let holder = try cache.assetDataManager(for: "busy", writable: false)
      defer { try? holder.close() }

      let report = try await cache.removeAll()
      #expect(report.objectsRemoved == 2)
      #expect(report.bytesFreed == usage)
      #expect(report.memoryBytesFreed == 10_000)
      #expect(report.busy == [cache.objectID(for: "busy")])
      #expect(try await cache.data(for: "a") == nil)
      #expect(try await cache.data(for: "busy") == Data(count: 500))
      #expect(cache.memory.count == 1, "only the object just read is in memory again")
    }
  }

  @Test func pinAndUnpinAreCommitted() async throws {
    try await Self.withCache { cache, _ in
      await #expect(throws: StoreError.notFound(cache.objectID(for: Self.url))) {
        try await cache.pin(Self.url)
      }
      try await cache.store(Data(count: 100), for: Self.url, policy: .diskOnly)
      #expect(try await cache.manifest(for: Self.url)?.isPinned == false)
      try await cache.pin(Self.url)
      #expect(try await cache.manifest(for: Self.url)?.isPinned == true)
      // Storing a new version keeps the pin; unpinning clears it.
      try await cache.store(Data(count: 200), for: Self.url, policy: .diskOnly)
      #expect(try await cache.manifest(for: Self.url)?.isPinned == true)
      try await cache.unpin(Self.url)
      #expect(try await cache.manifest(for: Self.url)?.isPinned == false)
    }
  }
}
