import Foundation
import MediaCacheHTTP
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

@testable import MediaCache

extension FaultTests.IOErrors {
  /// A full disk under an origin fetch (the writes of `MediaCacheHTTP`, not `store`): with limits set the fetch
  /// evicts least recently used objects and goes on, every byte served right and the pinned object kept;
  /// without limits ENOSPC reaches the reader and nothing is removed.
  @Test(arguments: [Int64(1) << 30, nil])
  func aFullDiskUnderAnOriginFetchEvictsWhenLimitsAreSet(maxSize: Int64?) async throws {
    try await withTemporaryDirectory { directory in
      let origin = try await TestOrigin.start()
      let cache = try MediaCache(
        configuration: .init(
          directory: FilePath("\(directory)/cache"), chunkSize: 65536, memoryCostLimit: 0,
          durability: .relaxed,
          maxSize: maxSize, maxAge: nil))
      let old = randomBytes(count: 200_000, seed: 1)
      let pinned = randomBytes(count: 100_000, seed: 2)
      try await cache.store(old, for: "old", policy: .diskOnly)
      try await cache.store(pinned, for: "pinned", policy: .diskOnly)
      try await cache.pin("pinned")
      let client = OriginClient()
      let reader = CachingReader(cache: cache, client: client, configuration: .init(maxRetries: 0))
      let size = 300_000
      let url = origin.url(.normal, "after-full", size: size)
      let full = DiskFullUntilFreed(root: cache.store.root)
      var received = Data()
      var failure: (any Error)?
      await withIOFaultHandler(full) {
        do {
          let bytes = try await reader.read(url)
          for try await piece in bytes { received.append(piece) }
          bytes.close()
        } catch {
          failure = error
        }
      }
      #expect(full.failures > 0)
      if maxSize != nil {
        #expect(failure == nil, "\(String(describing: failure))")
        #expect(received == Data(TestOrigin.bytes(name: "after-full", size: size)))
        #expect(try await cache.status(for: url) == .complete(length: Int64(size)))
        #expect(try await cache.status(for: "old") == .none, "the least recently used object was evicted")
      } else {
        if let failure = failure as? StoreError, failure.code == .io, failure.errno == .noSpace {
        } else {
          Issue.record("expected ENOSPC, got \(String(describing: failure))")
        }
        #expect(try await cache.data(for: "old", policy: .diskOnly) == old)
      }
      #expect(try await cache.data(for: "pinned", policy: .diskOnly) == pinned)
      await reader.cancelAll()
      try await client.shutdown()
      try await origin.shutdown()
    }
  }
}
