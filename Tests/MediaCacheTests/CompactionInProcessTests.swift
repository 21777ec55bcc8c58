import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// The compaction engine as an app runs it: `purge()`, the background pass started by crossing `maxSize`, the
/// `shouldEvict` veto, and the event stream.
@Suite struct CompactionInProcessTests {
  func configuration(
    _ directory: String, maxSize: Int64?, veto: (@Sendable (EvictionCandidate) -> Bool)? = nil
  )
    -> MediaCache.Configuration
  {
    MediaCache.Configuration(
      directory: FilePath("\(directory)/cache"), chunkSize: 4096, memoryCostLimit: 0, durability: .relaxed,
      maxSize: maxSize, maxAge: nil, shouldEvict: veto)
  }

  /// Stores `count` objects of `size` bytes and gives them recency stamps a minute apart, `key-0` oldest.
  func fill(_ cache: MediaCache, count: Int, size: Int) async throws {
    let start = Date().timeIntervalSince1970 - 3600
    for index in 0..<count {
      try await cache.store(
        randomBytes(count: size, seed: UInt64(index)), for: "key-\(index)", policy: .diskOnly)
      try FileSystemCalls.setModificationTime(
        cache.store.paths(for: cache.objectID(for: "key-\(index)")).manifest,
        seconds: start + Double(index) * 60)
    }
  }

  @Test func purgeEvictsOldestButKeepsVetoedAndPinned() async throws {
    try await withTemporaryDirectory { directory in
      let keep = CacheKey("key-1").objectID
      let cache = try MediaCache(
        configuration: configuration(directory, maxSize: nil, veto: { $0.id != keep }))
      try await fill(cache, count: 6, size: 20_000)
      try await cache.pin("key-0")
      // Pinning rewrote key-0's manifest; make it the oldest again.
      try FileSystemCalls.setModificationTime(
        cache.store.paths(for: cache.objectID(for: "key-0")).manifest,
        seconds: Date().timeIntervalSince1970 - 7200)
      let perObject = try cache.store.diskUsage(cache.objectID(for: "key-2"))
      let limited = try MediaCache(
        configuration: configuration(directory, maxSize: perObject * 4, veto: { $0.id != keep }))
      let events = limited.events()
      let report = try await limited.purge()
      #expect(report.pinnedKept == 1)
      #expect(report.vetoed == 1)
      // Oldest first, skipping the pinned key-0 and vetoed key-1, until at most 90% of 4 objects remain.
      #expect(report.removed.map(\.id) == ["key-2", "key-3", "key-4"].map { CacheKey($0).objectID })
      #expect(report.removed.allSatisfy { $0.reason == .size })
      #expect(try await limited.status(for: "key-5") != .none)
      #expect(try await limited.status(for: "key-0") != .none)
      #expect(try await limited.status(for: "key-2") == .none)
      var iterator = events.makeAsyncIterator()
      let event = await iterator.next()
      #expect(event == .removed(report.removed))
    }
  }

  @Test func crossingMaxSizeEmitsAnEventAndCompactsInTheBackground() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try MediaCache(configuration: configuration(directory, maxSize: 100_000))
      let events = cache.events()
      // The first write starts a pass that learns the total; later writes are counted against it.
      try await cache.store(randomBytes(count: 30_000, seed: 1), for: "first", policy: .diskOnly)
      try await Task.sleep(for: .milliseconds(200))
      for index in 0..<6 {
        try await cache.store(
          randomBytes(count: 30_000, seed: UInt64(10 + index)), for: "k\(index)", policy: .diskOnly)
      }
      var exceeded: Int64?
      var removedCount = 0
      for await event in events {
        switch event {
        case .exceededMaxSize(let bytes): exceeded = bytes
        case .removed(let objects): removedCount += objects.count
        case .chunksDropped, .trimmed: break
        }
        if exceeded != nil && removedCount > 0 { break }
      }
      #expect((exceeded ?? 0) > 100_000)
      #expect(removedCount > 0)
      // The first removal may come from a pass that began before the last writes: a later pass (started by
      // the writes it did not count) brings the total down. Wait for it, with a bound for a hang.
      var total = try cache.store.scanObjects().reduce(0) { $0 + $1.diskBytes }
      let deadline = Date().addingTimeInterval(20)
      while total > 100_000 + 30_000 * 2 && Date() < deadline {
        try await Task.sleep(for: .milliseconds(50))
        total = try cache.store.scanObjects().reduce(0) { $0 + $1.diskBytes }
      }
      #expect(total <= 100_000 + 30_000 * 2, "total after the background passes: \(total)")
    }
  }

  @Test func manualRemovalAndCorruptChunksAreReported() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try MediaCache(configuration: configuration(directory, maxSize: nil))
      try await cache.store(
        randomBytes(count: 12_000, seed: 3), for: "a", policy: .diskOnly, userMetadata: Data("meta".utf8))
      try await cache.store(randomBytes(count: 12_000, seed: 4), for: "b", policy: .diskOnly)
      let events = cache.events()
      var iterator = events.makeAsyncIterator()

      let freed = try await cache.remove("a")
      let removed = await iterator.next()
      #expect(
        removed
          == .removed([
            RemovedObject(
              id: CacheKey("a").objectID, userMetadata: Data("meta".utf8), bytes: freed, reason: .manual)
          ]))

      try flipByte(atPath: cache.store.paths(for: CacheKey("b").objectID).data, offset: 5000)
      await #expect(throws: StoreError.self) { try await cache.data(for: "b", policy: .diskOnly) }
      #expect(await iterator.next() == .chunksDropped(CacheKey("b").objectID, count: 1))

      let report = try await cache.removeAll()
      #expect(report.objectsRemoved == 1)
      guard case .removed(let objects) = await iterator.next() else {
        Issue.record("expected a removal event")
        return
      }
      #expect(objects.map(\.reason) == [.manual])
      #expect(objects.map(\.bytes).reduce(0, +) == report.bytesFreed)
    }
  }

  /// A removal cut short between its two unlinks leaves a data file without a manifest. The next pass removes
  /// it even with no limit crossed, but not one a writer holds open (it is about to commit its first manifest).
  @Test func orphanDataFilesGoUnlessSomeoneHasThemOpen() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try MediaCache(configuration: configuration(directory, maxSize: nil))
      for key in ["kept", "cut-short", "being-written"] {
        try await cache.store(randomBytes(count: 20_000, seed: 7), for: key, policy: .diskOnly)
      }
      let cutShort = cache.store.paths(for: CacheKey("cut-short").objectID)
      let beingWritten = cache.store.paths(for: CacheKey("being-written").objectID)
      try FileManager.default.removeItem(atPath: cutShort.manifest)
      try FileManager.default.removeItem(atPath: beingWritten.manifest)
      let writer = try SystemFile(path: beingWritten.data, writable: true)
      #expect(try writer.lock(exclusive: false, wait: false))

      var dry = CompactionPolicy(maxSize: nil, maxAge: nil)
      dry.dryRun = true
      let preview = try Compactor(store: cache.store, policy: dry).runPass()
      #expect(preview.orphansRemoved == 1)
      #expect(FileManager.default.fileExists(atPath: cutShort.data))

      let report = try await cache.purge()
      #expect(report.orphansRemoved == 1)
      #expect(report.evictedCount == 0)
      #expect(report.bytesFreed > 20_000)
      #expect(!FileManager.default.fileExists(atPath: cutShort.data))
      #expect(FileManager.default.fileExists(atPath: beingWritten.data))
      #expect(try await cache.data(for: "kept", policy: .diskOnly) == randomBytes(count: 20_000, seed: 7))

      writer.close()
      #expect(try await cache.purge().orphansRemoved == 1)
      #expect(!FileManager.default.fileExists(atPath: beingWritten.data))
    }
  }
}
