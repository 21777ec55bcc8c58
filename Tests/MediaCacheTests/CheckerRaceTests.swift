import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The checker walks the tree first and checks objects afterwards; objects removed or created by other processes
/// in between (an evictor, `mediacache rm`, a writer) must not be reported as damage. Found by
/// `tools/torture --classes many-processes`, where `cache-fsck -n` runs beside a compactor with a tiny limit.
@Suite struct CheckerRaceTests {
  /// A complete object of `size` bytes under `key`, closed.
  func put(_ store: ShardedStore, _ key: String, size: Int = 10_000) throws -> ObjectID {
    let id = CacheKey(key).objectID
    let manager = try FileHandleAssetDataManager(store: store, id: id)
    try manager.setContentLength(Int64(size))
    try manager.write(randomBytes(count: size, seed: UInt64(size)), at: 0)
    try manager.close()
    return id
  }

  /// Removes `id` as another process would, trying again while it is busy: a child process that another test
  /// of this process is starting holds the lock of a file this test just closed for a moment (between its `fork`
  /// and `exec` it shares the open file, and the lock is the open file's; RELIABILITY.md bug 44). CI saw one
  /// such removal fail. Returns whether the object was removed (within about a second).
  func removeRetryingWhileBusy(_ store: ShardedStore, _ id: ObjectID) -> Bool {
    for _ in 0..<1000 {
      do {
        _ = try store.remove(id)
        return true
      } catch let error as StoreError where error.code == .busy {
        usleep(1000)
      } catch {
        return false
      }
    }
    return false
  }

  /// Three objects; the checker is made to check them in id order, and the middle one is removed (manifest
  /// first, then data, then its emptied shard directories, as `ShardedStore.remove` does) after the walk, while
  /// the first one is being reported.
  @Test(arguments: [false, true])
  func anObjectRemovedAfterTheWalkIsNotDamage(repair: Bool) async throws {
    try await withStore { store in
      let ids = try (0..<3).map { try put(store, "https://race.example/\($0)") }.sorted()
      let checker = CacheChecker(root: FilePath(store.root), options: .init(repair: repair))
      var (tried, removed) = (false, false)
      let report = try checker.run(progress: { _ in
        if !tried {
          tried = true
          removed = removeRetryingWhileBusy(store, ids[1])
        }
      })
      #expect(removed)
      #expect(try store.readManifest(ids[1]) == nil)
      #expect(report.findings.isEmpty, "\(report.findings)")
      #expect(report.exitStatus == 0)
      for id in [ids[0], ids[2]] { #expect(try store.readManifest(id)?.isComplete == true) }
    }
  }

  /// The same, but a writer opens the object again (a new data file, locked, no manifest yet) before the
  /// checker gets to it: the object is busy, and its missing manifest is not damage either.
  @Test func anObjectRemovedAndBeingWrittenAgainIsBusyNotDamage() async throws {
    try await withStore { store in
      let ids = try (0..<3).map { try put(store, "https://race.example/\($0)") }.sorted()
      let checker = CacheChecker(root: FilePath(store.root), options: .init(repair: true))
      var writer: FileHandleAssetDataManager?
      let report = try checker.run(progress: { _ in
        if writer == nil {
          #expect(removeRetryingWhileBusy(store, ids[1]))
          writer = try? FileHandleAssetDataManager(store: store, id: ids[1])
        }
      })
      #expect(writer != nil)
      #expect(report.findings.isEmpty, "\(report.findings)")
      #expect(report.exitStatus == 0)
      try writer?.close()
    }
  }
}
