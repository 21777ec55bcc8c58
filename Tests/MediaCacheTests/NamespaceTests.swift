import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Namespaces: one cache directory, a tree per asset type under `namespaces/<name>/`, each with its own memory
/// tier and disk limits; the checker covers them all.
@Suite struct NamespaceTests {
  func open(_ directory: String, namespaces: [MediaCache.Namespace]) throws -> MediaCache {
    var configuration = MediaCache.Configuration(
      directory: FilePath("\(directory)/cache"), chunkSize: 4096, memoryCostLimit: 1 << 20,
      durability: .relaxed, maxSize: nil, maxAge: nil)
    configuration.namespaces = namespaces
    return try MediaCache(configuration: configuration)
  }

  static let namespaces = [
    MediaCache.Namespace("image", memoryCostLimit: 16_000, limits: .init(maxSize: 60_000, maxAge: nil)),
    MediaCache.Namespace(
      "video", memoryCostLimit: 1 << 20, limits: .init(maxSize: nil, maxAge: .seconds(3600))),
  ]

  @Test func eachNamespaceIsATreeWithItsOwnMemoryTierAndLimits() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory, namespaces: Self.namespaces)
      let image = try cache.namespace("image")
      let video = try cache.namespace("video")
      #expect(try cache.namespace("image") === image)
      #expect(cache.namespaceNames == ["image", "video"])
      #expect(image.store.root == "\(directory)/cache/namespaces/image")
      #expect(image.limits.maxSize == 60_000 && video.limits.maxAge == .seconds(3600))

      // The same key is a different object in each namespace and in the root.
      try await image.store(randomBytes(count: 10_000, seed: 1), for: "k")
      try await video.store(randomBytes(count: 20_000, seed: 2), for: "k")
      #expect(try await cache.status(for: "k") == .none)
      #expect(try await image.data(for: "k") == randomBytes(count: 10_000, seed: 1))
      #expect(try await video.data(for: "k") == randomBytes(count: 20_000, seed: 2))
      // Memory tiers: image holds one 10 kB object at most, video both.
      try await image.store(randomBytes(count: 10_000, seed: 3), for: "k2")
      try await video.store(randomBytes(count: 20_000, seed: 4), for: "k2")
      #expect(image.memory.count == 1 && image.memory.totalCost <= 16_000)
      #expect(video.memory.count == 2)
      #expect(cache.memory.count == 0)

      // The image size limit evicts images only.
      for index in 0..<8 {
        try await image.store(randomBytes(count: 10_000, seed: UInt64(10 + index)), for: "img-\(index)")
      }
      // (Writes over the limit start passes in the background too: let them end, then check what is left,
      // not who evicted.)
      while image.tracking.withLock({ $0.compactionRunning }) { try await Task.sleep(for: .milliseconds(10)) }
      let report = try await image.purge()
      #expect(report.bytesAfter <= 60_000)
      #expect(try image.store.allObjectIDs().count < 10, "10 images of 10 kB were stored")
      let videoReport = try await video.purge()
      #expect(videoReport.evictedCount == 0 && videoReport.objectsScanned == 2)
      #expect(try await video.data(for: "k") != nil)

      // The checker covers every namespace; a corrupt image chunk is reported under its namespace's path.
      #expect(try CacheChecker(root: FilePath("\(directory)/cache")).run().findings.isEmpty)
      let id = image.objectID(for: "img-7")
      try flipByte(atPath: image.store.paths(for: id).data, offset: 100)
      let check = try CacheChecker(root: FilePath("\(directory)/cache")).run()
      #expect(check.findings.map(\.kind) == [.chunkChecksum])
      let dataPath = image.store.paths(for: id).data.dropFirst("\(directory)/cache/".count)
      #expect(check.findings.first?.path == String(dataPath))
      #expect(dataPath.hasPrefix("namespaces/image/objects/"))
      #expect(check.totals.objects == (try image.store.allObjectIDs().count) + 2)
    }
  }

  @Test func badNamespaceNamesAndUnknownOnesAreTypedErrors() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory, namespaces: Self.namespaces)
      #expect(throws: StoreError.noSuchNamespace("thumbnails")) { try cache.namespace("thumbnails") }
      for bad in ["", "Image", "a/b", "..", ".hidden", String(repeating: "n", count: 65), "é"] {
        #expect { try cache.namespace(bad) } throws: { ($0 as? StoreError)?.code == .invalidNamespace }
      }
      #expect { try cache.namespace(String(repeating: "n", count: 64)) } throws: {
        ($0 as? StoreError)?.code == .noSuchNamespace
      }
      // A configuration with a bad or repeated name opens nothing.
      for namespaces in [[MediaCache.Namespace("bad name")], [.init("a"), .init("a")]] {
        #expect { try open("\(directory)/other", namespaces: namespaces) } throws: {
          ($0 as? StoreError)?.code == .invalidConfiguration
        }
      }
      #expect(!FileManager.default.fileExists(atPath: "\(directory)/other/cache/namespaces/a"))
    }
  }
}
