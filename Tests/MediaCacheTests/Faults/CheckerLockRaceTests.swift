import Foundation
import MediaCacheTestSupport
import Synchronization
import SystemPackage
import Testing

@testable import MediaCache

extension FaultTests {
  /// The checker opens an object's data file, then locks it. An evictor that removes the object in between
  /// (manifest, then data file) leaves the checker holding an unlinked inode, free to lock: it must not report
  /// that as a data file without a manifest. Found by `tools/torture --classes many-processes` in CI
  /// (`cache-fsck -n` beside the compactor and `mediacache rm`: exit 4, `orphan-data`).
  @Suite struct CheckerLockRace {
    /// Removes `id` right after the checker's open of its data file (once; the removal's own open is let be).
    final class RemoveAfterOpen: IOFaultHandler {
      let store: ShardedStore
      let id: ObjectID
      private let done = Mutex(false)
      init(store: ShardedStore, id: ObjectID) {
        self.store = store
        self.id = id
      }
      var removed: Bool { done.withLock { $0 } }

      func before(_ event: IOEvent) throws(Errno) -> (any Sendable)? { nil }

      func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?) {
        guard event.operation == .open, event.path == store.paths(for: id).data, error == nil else { return }
        let first = done.withLock { done -> Bool in
          defer { done = true }
          return !done
        }
        if first { _ = try? store.remove(id) }
      }
    }

    @Test(arguments: [false, true])
    func anObjectRemovedBetweenTheOpenAndTheLockIsNotAnOrphan(repair: Bool) async throws {
      try await withStore { store in
        let id = CacheKey("https://race.example/lock").objectID
        let manager = try FileHandleAssetDataManager(store: store, id: id)
        try manager.setContentLength(10_000)
        try manager.write(randomBytes(count: 10_000, seed: 3), at: 0)
        try manager.close()
        let other = CacheKey("https://race.example/other").objectID
        let second = try FileHandleAssetDataManager(store: store, id: other)
        try second.setContentLength(5_000)
        try second.write(randomBytes(count: 5_000, seed: 4), at: 0)
        try second.close()

        let handler = RemoveAfterOpen(store: store, id: id)
        let report = try await withIOFaultHandler(handler) {
          try CacheChecker(root: FilePath(store.root), options: .init(repair: repair)).run()
        }
        #expect(handler.removed)
        #expect(try store.readManifest(id) == nil)
        #expect(report.findings.isEmpty, "\(report.findings)")
        #expect(report.exitStatus == 0)
        #expect(try store.readManifest(other)?.isComplete == true)
      }
    }
  }
}
