import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// A writable `FileHandleAssetDataManager` opened with `deferringCreation` (how the read engine opens objects):
/// a new object's data file is made by its first user (a write, a commit), not by the open nor by recording
/// the object's length, which the file gets as it is made; a close before any write leaves no file behind.
/// Real files of a real `ShardedStore`.
@Suite struct DeferredCreationTests {
  static let id = AssetDataManagerTests.id

  static func exists(_ path: String) throws -> Bool { try FileSystemCalls.fileType(path) != nil }

  /// Stores `data` as the whole object through an eager open, committed.
  static func storeWhole(_ data: Data, in store: ShardedStore) throws {
    try FileHandleAssetDataManager.withAssetData(store: store, id: id) { manager in
      try manager.setContentLength(Int64(data.count))
      try manager.write(data, at: 0)
    }
  }

  @Test(arguments: Durability.allCases)
  func aNewObjectIsStoredAsWithAnEagerOpen(_ durability: Durability) async throws {
    try await withStore(durability: durability) { store in
      let data = randomBytes(count: 5 * AssetDataManagerTests.chunk + 777, seed: 31)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, deferringCreation: true)
      // The length is kept for the file, which the first write makes.
      try manager.setContentLength(Int64(data.count))
      for start in stride(from: 0, to: data.count, by: AssetDataManagerTests.chunk) {
        let end = min(data.count, start + AssetDataManagerTests.chunk)
        try manager.write(data[start..<end], at: Int64(start))
      }
      #expect(try manager.read(0..<Int64(data.count)) == data)
      try manager.close()
      try AssetDataManagerTests.expectStored(data, in: store)
    }
  }

  @Test func theDataFileIsMadeByTheFirstWriteSizedAndHeldInUse() async throws {
    try await withStore { store in
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, deferringCreation: true)
      let path = store.paths(for: Self.id).data
      let length = Int64(3 * AssetDataManagerTests.chunk + 100)
      try manager.setContentLength(length)
      // Neither the open nor the length made the file (nothing in the background either: the executor is
      // waited past).
      for _ in 0..<(2 * IOExecutor.defaultThreads) { try await IOExecutor.shared.run {} }
      #expect(try !Self.exists(path))
      #expect(try !store.isBusy(Self.id))
      let bytes = randomBytes(count: 100, seed: 34)
      try manager.write(bytes, at: 0)
      // Made by the write, sized to the length recorded before it (a sparse file), and locked like an eager
      // open's file: no remover takes the object while the manager has it.
      #expect(try FileSystemCalls.status(path)?.size == length)
      #expect(try store.isBusy(Self.id))
      #expect(try manager.read(0..<100) == bytes)
      // A length recorded once the file exists sizes it at once.
      let other = ObjectID(CacheKey("https://example.com/sized-after-the-write.mp4"))
      let second = try FileHandleAssetDataManager(store: store, id: other, deferringCreation: true)
      try second.write(bytes, at: 0)
      #expect(try FileSystemCalls.status(store.paths(for: other).data)?.size == 100)
      try second.setContentLength(length)
      #expect(try FileSystemCalls.status(store.paths(for: other).data)?.size == length)
      try second.close()
      try manager.close()
      #expect(try store.readManifest(Self.id)?.contentLength == length)
    }
  }

  /// A length over the store's `largestDeferredFileSize` is applied at once: a file system's limit then fails
  /// the call that records it (a miss's head check), not a write after the first bytes were handed over.
  @Test func aVeryLargeLengthMakesAndSizesTheFileAtOnce() async throws {
    try await withStore { store in
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, deferringCreation: true)
      let path = store.paths(for: Self.id).data
      #expect(store.largestDeferredFileSize <= 1 << 40)
      let length = store.largestDeferredFileSize + 1
      try manager.setContentLength(length)
      #expect(try FileSystemCalls.status(path)?.size == length)
      #expect(try store.isBusy(Self.id))
      try manager.close()
    }
  }

  @Test func aCloseAfterOnlyALengthCommitsItWithAFile() async throws {
    try await withStore { store in
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, deferringCreation: true)
      try manager.setContentLength(12_345)
      #expect(try !Self.exists(store.paths(for: Self.id).data))
      // The length is part of the object's identity and is committed; the commit makes the file, sized.
      try manager.close()
      #expect(try store.readManifest(Self.id)?.contentLength == 12_345)
      #expect(try FileSystemCalls.status(store.paths(for: Self.id).data)?.size == 12_345)
    }
  }

  @Test func aCloseBeforeAnyUseLeavesNoFile() async throws {
    try await withStore { store in
      for round in 0..<50 {
        let id = ObjectID(CacheKey("https://example.com/closed-at-once-\(round).mp4"))
        let manager = try FileHandleAssetDataManager(store: store, id: id, deferringCreation: true)
        try manager.close()
        #expect(try !Self.exists(store.paths(for: id).data), "round \(round)")
        #expect(try store.readManifest(id) == nil)
      }
    }
  }

  /// A child process started while a manager closes holds the data file's lock for a moment (between its
  /// `fork` and `exec` it shares the open file, and the lock is the open file's): the close's removal of the
  /// file nobody committed must outlast that, not leave an orphan. Children are spawned all through the rounds.
  @Test func aCloseWhileChildProcessesStartLeavesNoFile() async throws {
    try await withStore { store in
      let spawning = Atomic<Bool>(true)
      let spawner = Thread {
        while spawning.load(ordering: .relaxed) {
          let child = Process()
          child.executableURL = URL(fileURLWithPath: "/bin/true")
          try? spawningAlone { try child.run() }  // as every spawn of the tests (RELIABILITY.md bug 43)
          child.waitUntilExit()
        }
      }
      spawner.start()
      defer { spawning.store(false, ordering: .relaxed) }
      for round in 0..<300 {
        let id = ObjectID(CacheKey("https://example.com/closed-while-spawning-\(round).mp4"))
        let manager = try FileHandleAssetDataManager(store: store, id: id)
        try manager.close()
        #expect(try !Self.exists(store.paths(for: id).data), "round \(round)")
      }
    }
  }

  @Test func anExistingObjectIsOpenedAtOnce() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * AssetDataManagerTests.chunk, seed: 32)
      try Self.storeWhole(data, in: store)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, deferringCreation: true)
      #expect(try store.isBusy(Self.id), "the existing data file is locked by the open itself")
      #expect(try manager.read(0..<Int64(data.count)) == data)
      try manager.close()
      try AssetDataManagerTests.expectStored(data, in: store)
    }
  }

  @Test func aManifestWithoutItsDataFileGetsTheFileAtTheOpen() async throws {
    try await withStore { store in
      let chunk = Int64(AssetDataManagerTests.chunk)
      let data = randomBytes(count: 3 * Int(chunk), seed: 33)
      try Self.storeWhole(data, in: store)
      // Damage: the data file goes, the manifest that lists its chunks stays.
      try FileManager.default.removeItem(atPath: store.paths(for: Self.id).data)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, deferringCreation: true)
      #expect(try Self.exists(store.paths(for: Self.id).data))
      // A middle chunk is read from the (empty) new file and fails its check: an error, never wrong bytes.
      #expect(throws: StoreError.self) { try manager.read(chunk..<(2 * chunk)) }
      // (An object's first and last chunks may come from `VerifiedChunkCache`, which names a file by its inode:
      // the new file can get the inode of the one removed, and then its verified bytes, which are the bytes the
      // manifest's CRC names. Either an error or those bytes, then.)
      do {
        #expect(try manager.read(0..<chunk) == data.prefix(Int(chunk)))
      } catch is StoreError {}
      try manager.close()
    }
  }
}
