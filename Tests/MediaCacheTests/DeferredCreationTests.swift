import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// A writable `FileHandleAssetDataManager` opened with `deferringCreation` (how the read engine opens objects):
/// a new object's data file is made on the I/O executor after the open returns, or by its first user, and a
/// close before any write leaves no file behind. Real files of a real `ShardedStore`.
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
      // Used at once, before the executor may have made the file: the first use makes it.
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

  @Test func theDataFileIsMadeInTheBackgroundAndHeldInUse() async throws {
    try await withStore { store in
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, deferringCreation: true)
      let path = store.paths(for: Self.id).data
      let deadline = ContinuousClock.now + .seconds(10)
      while try !Self.exists(path), ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(5))
      }
      #expect(try Self.exists(path), "the executor made the data file")
      // Made locked, like an eager open's: no remover takes the object while the manager has it.
      #expect(try store.isBusy(Self.id))
      try manager.close()
      // Nothing was committed: the file nobody wrote is removed, as after an eager open.
      #expect(try !Self.exists(path))
      #expect(try store.readManifest(Self.id) == nil)
    }
  }

  @Test func aCloseBeforeAnyUseLeavesNoFile() async throws {
    try await withStore { store in
      for round in 0..<50 {
        let id = ObjectID(CacheKey("https://example.com/closed-at-once-\(round).mp4"))
        let manager = try FileHandleAssetDataManager(store: store, id: id, deferringCreation: true)
        try manager.close()
        // The creation job, if it had not run by the close, does nothing when it runs: wait for the executor to
        // get past it.
        for _ in 0..<(2 * IOExecutor.defaultThreads) { try await IOExecutor.shared.run {} }
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
