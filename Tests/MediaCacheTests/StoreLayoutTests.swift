import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Opening a cache directory: the FORMAT marker, refusing directories that are not caches, file modes, and the
/// default location.
@Suite struct StoreLayoutTests {
  static func entries(_ path: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: path).sorted()
  }

  @Test func defaultDirectoryComesFromTheEnvironment() {
    typealias Config = MediaCache.Configuration
    #expect(
      Config.defaultDirectory(environment: ["MEDIACACHE_DIR": "/m", "XDG_CACHE_HOME": "/x", "HOME": "/h"])
        == "/m")
    #expect(Config.defaultDirectory(environment: ["XDG_CACHE_HOME": "/x", "HOME": "/h"]) == "/x/mediacache")
    #expect(Config.defaultDirectory(environment: ["HOME": "/h"]) == "/h/.cache/mediacache")
    // Empty values count as unset.
    #expect(
      Config.defaultDirectory(environment: ["MEDIACACHE_DIR": "", "XDG_CACHE_HOME": "", "HOME": "/h"])
        == "/h/.cache/mediacache")
    #expect(Config.defaultDirectory(environment: [:]).string.hasSuffix("/.cache/mediacache"))
  }

  @Test func aNewCacheIsCreatedWithPrivateModes() async throws {
    try await withTemporaryDirectory { directory in
      let root = "\(directory)/a/b/cache"
      // No size limit: no pass starts behind the test's back (one would write `usage` through tmp/).
      let cache = try MediaCache(
        configuration: .init(directory: FilePath(root), chunkSize: 4096, maxSize: nil, maxAge: nil))
      try await cache.store(randomBytes(count: 5000, seed: 51), for: "x", policy: .diskOnly)
      let paths = cache.store.paths(for: cache.objectID(for: "x"))

      #expect(try String(contentsOfFile: "\(root)/FORMAT", encoding: .utf8) == "mediacache-format 1.1\n")
      for dir in [root, "\(root)/objects", "\(root)/tmp", paths.outerShard, paths.directory] {
        #expect(try permissions(dir) == 0o700, "\(dir)")
      }
      for file in ["\(root)/FORMAT", paths.data, paths.manifest] {
        #expect(try permissions(file) == 0o600, "\(file)")
      }
      #expect(try Self.entries(root) == ["FORMAT", "objects", "tmp"])
      #expect(try Self.entries("\(root)/tmp").isEmpty, "no staging file is left behind")
      // A pass records the total in the root, private like the rest, through tmp/.
      _ = try await cache.purge()
      #expect(try Self.entries(root) == ["FORMAT", "objects", "tmp", "usage"])
      #expect(try permissions("\(root)/usage") == 0o600)
      #expect(try Self.entries("\(root)/tmp").isEmpty)
    }
  }

  @Test func anEmptyDirectoryBecomesACache() async throws {
    try await withTemporaryDirectory { directory in
      let store = try ShardedStore(root: directory + "///", chunkSize: 4096)
      #expect(store.root == directory)
      #expect(try Self.entries(directory) == ["FORMAT", "objects", "tmp"])
      // Opening it again is fine and changes nothing.
      _ = try ShardedStore(root: directory, chunkSize: 4096)
      #expect(try Self.entries(directory) == ["FORMAT", "objects", "tmp"])
    }
  }

  @Test func aNonEmptyDirectoryWithoutFormatIsNotACache() async throws {
    try await withTemporaryDirectory { directory in
      try Data("mine".utf8).write(to: URL(fileURLWithPath: "\(directory)/notes.txt"))
      try FileManager.default.createDirectory(
        atPath: "\(directory)/photos", withIntermediateDirectories: false)
      #expect(throws: StoreError.notACache(path: FilePath(directory))) {
        try MediaCache(configuration: .init(directory: FilePath(directory), chunkSize: 4096))
      }
      #expect(try Self.entries(directory) == ["notes.txt", "photos"], "nothing was created in it")
      #expect(try Self.entries("\(directory)/photos").isEmpty)
    }
  }

  @Test func aFileIsNotACache() async throws {
    try await withTemporaryDirectory { directory in
      let path = "\(directory)/file"
      try Data("x".utf8).write(to: URL(fileURLWithPath: path))
      #expect(throws: StoreError.notACache(path: FilePath(path), directory: false)) {
        try ShardedStore(root: path, chunkSize: 4096)
      }
      #expect(try fileBytes(path) == Data("x".utf8))
    }
  }

  @Test(arguments: [
    ("mediacache-format 2.0\n", "mediacache-format 2.0"),
    ("mediacache-format 0.9", "mediacache-format 0.9"),
    ("something else entirely", "something else entirely"),
    // Quoted on one line: an error is one line (it was two, the newline quoted as it was).
    ("garbage\n\t", "garbage\\n\\t"),
  ])
  func anUnknownFormatIsRefused(_ marker: String, _ reported: String) async throws {
    try await withTemporaryDirectory { directory in
      try Data(marker.utf8).write(to: URL(fileURLWithPath: "\(directory)/FORMAT"))
      #expect(throws: StoreError.unsupportedFormat(path: FilePath(directory), found: reported)) {
        try ShardedStore(root: directory, chunkSize: 4096)
      }
      #expect(try Self.entries(directory) == ["FORMAT"], "nothing was created in it")
      #expect(try fileBytes("\(directory)/FORMAT") == Data(marker.utf8))
    }
  }

  @Test func aNewerMinorFormatOpens() async throws {
    try await withTemporaryDirectory { directory in
      try Data("mediacache-format 1.7\n".utf8).write(to: URL(fileURLWithPath: "\(directory)/FORMAT"))
      let store = try ShardedStore(root: directory, chunkSize: 4096)
      #expect(try store.allObjectIDs().isEmpty)
      #expect(try String(contentsOfFile: "\(directory)/FORMAT", encoding: .utf8) == "mediacache-format 1.7\n")
    }
  }

  @Test(arguments: [0, 4095, (64 << 20) + 1])
  func chunkSizeOutsideTheLimitsIsRefused(_ chunkSize: Int) async throws {
    try await withTemporaryDirectory { directory in
      expectStoreError({ _ = try ShardedStore(root: "\(directory)/c", chunkSize: chunkSize) }) {
        $0.code == .invalidConfiguration
      }
      #expect(!FileManager.default.fileExists(atPath: "\(directory)/c"))
    }
  }

  @Test func aCorruptManifestIsAMissForThatObjectOnly() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try MediaCache(configuration: .init(directory: FilePath(directory), chunkSize: 4096))
      let good = randomBytes(count: 6000, seed: 52)
      try await cache.store(good, for: "good", policy: .diskOnly)
      try await cache.store(randomBytes(count: 6000, seed: 53), for: "bad", policy: .diskOnly)
      let badID = cache.objectID(for: "bad")
      let manifestPath = cache.store.paths(for: badID).manifest
      try flipByte(atPath: manifestPath, offset: 60)

      expectStoreError({ _ = try cache.store.readManifest(badID) }) {
        $0.code == .corruptManifest && $0.objectID == badID && $0.path == FilePath(manifestPath)
          && ($0.cause as? ManifestError)?.code == .checksumMismatch
      }
      #expect(throws: StoreError.self) {
        try FileHandleAssetDataManager(store: cache.store, id: badID, writable: false)
      }
      #expect(try await cache.data(for: "good") == good)
      // A writer replaces the unreadable manifest.
      let writer = try FileHandleAssetDataManager(store: cache.store, id: badID)
      #expect(writer.manifest.presentChunks.isEmpty)
      try writer.setContentLength(10)
      try writer.write(Data(count: 10), at: 0)
      try writer.close()
      #expect(try cache.store.readManifest(badID)?.isComplete == true)
    }
  }

  @Test func listingAndReapingTemporaryFiles() async throws {
    try await withStore { store in
      let ids = ["a", "b", "c"].map { ObjectID(CacheKey($0)) }
      for id in ids {
        let manager = try FileHandleAssetDataManager(store: store, id: id)
        try manager.setContentLength(1)
        try manager.write(Data([7]), at: 0)
        try manager.close()
      }
      #expect(try store.allObjectIDs() == ids.sorted())
      let old = "\(store.tmpDirectory)/old.manifest"
      let young = "\(store.tmpDirectory)/young.manifest"
      try Data([1]).write(to: URL(fileURLWithPath: old))
      try Data([2]).write(to: URL(fileURLWithPath: young))
      try FileManager.default.setAttributes(
        [.modificationDate: Date(timeIntervalSinceNow: -7200)], ofItemAtPath: old)
      #expect(try store.reapStaleTemporaryFiles(olderThan: 3600) == 1)
      #expect(try Self.entries(store.tmpDirectory) == ["young.manifest"])
    }
  }
}
