import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The cheap questions (`isCached`, `cachedBytes(for:)`, `approximateBytes`: no tree walk) and limits changed
/// while the cache runs (`setLimits`), in effect from the next write.
@Suite struct LimitsTests {
  func open(_ directory: String) throws -> MediaCache {
    try MediaCache(
      configuration: MediaCache.Configuration(
        directory: FilePath("\(directory)/cache"), chunkSize: 4096, memoryCostLimit: 0, durability: .relaxed,
        maxSize: nil, maxAge: nil))
  }

  @Test func cheapQuestionsAnswerFromOneManifest() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory)
      try await cache.store(randomBytes(count: 10_000, seed: 1), for: "whole", policy: .diskOnly)
      let partial = try cache.assetDataManager(for: "part")
      try partial.setContentLength(20_000)
      try partial.write(randomBytes(count: 4096, seed: 2), at: 8192)
      try partial.close()
      #expect(try await cache.isCached("whole"))
      #expect(try await cache.cachedBytes(for: "whole") == 10_000)
      #expect(try await !cache.isCached("part"))
      #expect(try await cache.cachedBytes(for: "part") == 4096)
      #expect(try await !cache.isCached("absent"))
      #expect(try await cache.cachedBytes(for: "absent") == 0)
      // The total is learned by a pass, then follows this process's writes.
      #expect(cache.approximateBytes == nil)
      let report = try await cache.purge()
      #expect(cache.approximateBytes == report.bytesAfter && report.bytesAfter > 14_000)
      try await cache.store(randomBytes(count: 8192, seed: 3), for: "more", policy: .diskOnly)
      #expect(cache.approximateBytes == report.bytesAfter + 8192)
      // Another process opening the cache starts from the total the pass recorded in the root (no walk).
      #expect(try open(directory).approximateBytes == report.bytesAfter)
      let dryRun = try Compactor(
        directory: FilePath("\(directory)/cache"), policy: CompactionPolicy(maxSize: 0, dryRun: true)
      ).runPass()
      #expect(dryRun.bytesAfter < report.bytesAfter)
      #expect(try open(directory).approximateBytes == report.bytesAfter, "a dry run records nothing")
      // Under a size limit, the first write still starts a pass that learns the total now: the recorded one
      // may be old (here it says 1 byte).
      try Data("1 0\n".utf8).write(to: URL(fileURLWithPath: "\(directory)/cache/usage"))
      var limited = cache.configuration
      limited.maxSize = 1 << 30
      let fresh = try MediaCache(configuration: limited)
      #expect(fresh.approximateBytes == 1)
      try await fresh.store(randomBytes(count: 4096, seed: 4), for: "after", policy: .diskOnly)
      let deadline = ContinuousClock.now + .seconds(10)
      while (fresh.approximateBytes ?? 0) < report.bytesAfter, ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(20))
      }
      #expect((fresh.approximateBytes ?? 0) >= report.bytesAfter + 4096, "the pass learned the real total")
    }
  }

  @Test func aNewSizeLimitTakesEffectAtTheNextWrite() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory)
      for index in 0..<6 {
        try await cache.store(
          randomBytes(count: 20_000, seed: UInt64(index)), for: "key-\(index)", policy: .diskOnly)
      }
      _ = try await cache.purge()
      let before = try #require(cache.approximateBytes)
      let events = cache.events()
      var limits = cache.limits
      limits.maxSize = before / 2
      try cache.setLimits(limits)
      #expect(cache.limits.maxSize == before / 2)
      #expect(try await cache.isCached("key-0"))
      // The next write finds the total over the new limit: a pass evicts the least recently used.
      try await cache.store(randomBytes(count: 4096, seed: 9), for: "next", policy: .diskOnly)
      var iterator = events.makeAsyncIterator()
      var removed: [RemovedObject] = []
      while removed.isEmpty, let event = await iterator.next() {
        if case .removed(let objects) = event { removed = objects }
      }
      #expect(!removed.isEmpty)
      #expect(try await !cache.isCached("key-0"))
      #expect(try await cache.isCached("next"))

      // Bad limits change nothing.
      var bad = cache.limits
      bad.lowWatermark = 1.5
      #expect(throws: StoreError.self) { try cache.setLimits(bad) }
      bad = cache.limits
      bad.maxSize = -1
      #expect(throws: StoreError.self) { try cache.setLimits(bad) }
      #expect(cache.limits.maxSize == before / 2 && cache.limits.lowWatermark == 0.9)
    }
  }
}
