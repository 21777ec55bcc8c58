import Foundation
import MediaCacheTestSupport
import Synchronization
import SystemPackage
import Testing

@testable import MediaCache

extension FaultTests {
  /// An object's recency stamp (the manifest's modification time, `ShardedStore.noteAccess`) is set where a
  /// manifest is: not by the open of a new object nor by reads of its bytes before its first commit, whose
  /// manifest does not exist yet (a `utimensat` that could only fail, one of them on every miss's path), and
  /// once by the open of an object that has one, writable or not.
  @Suite struct RecencyStamp {
    /// Records the `utimensat` calls made under `root`: their paths, and whether each succeeded.
    final class TouchCounter: IOFaultHandler {
      let root: String
      private let touched = Mutex<[(path: String, succeeded: Bool)]>([])
      init(root: String) { self.root = root }
      /// Every call's path.
      var paths: [String] { touched.withLock { $0.map(\.path) } }
      /// The paths whose times were set.
      var stamped: [String] { touched.withLock { $0.filter(\.succeeded).map(\.path) } }

      func before(_ event: IOEvent) throws(Errno) -> (any Sendable)? { nil }

      func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?) {
        guard event.operation == .touch, event.path.hasPrefix(root) else { return }
        touched.withLock { $0.append((event.path, error == nil)) }
      }
    }

    @Test(arguments: [false, true])
    func aNewObjectsOpenStampsNothingAndAStoredObjectsOpenStampsItsManifest(deferring: Bool) async throws {
      try await withStore { store in
        let id = CacheKey("https://recency.example/\(deferring)").objectID
        let counter = TouchCounter(root: store.root)
        try await withIOFaultHandler(counter) {
          // No background commit before `close` (its 2 s interval could pass in a slow run).
          let manager = try FileHandleAssetDataManager(
            store: store, id: id, commitPolicy: .init(interval: .seconds(3600)), deferringCreation: deferring)
          #expect(counter.paths.isEmpty, "the open of a new object touched \(counter.paths)")
          try manager.setContentLength(10_000)
          try manager.write(randomBytes(count: 10_000, seed: 7), at: 0)
          // Read back before any commit (as a reader behind a flight reads what it wrote).
          #expect(try manager.read(0..<10_000) == Data(randomBytes(count: 10_000, seed: 7)))
          #expect(try store.readManifest(id) == nil)
          try manager.close()
          #expect(counter.paths.isEmpty, "writing, reading and committing touched \(counter.paths)")
          #expect(try store.readManifest(id)?.isComplete == true)

          let again = try FileHandleAssetDataManager(store: store, id: id, writable: false)
          #expect(counter.paths == [store.paths(for: id).manifest])
          #expect(counter.stamped == [store.paths(for: id).manifest])
          #expect(try again.read(0..<10_000) == Data(randomBytes(count: 10_000, seed: 7)))
          try again.close()
          // At most once a minute per object and store instance.
          #expect(counter.paths == [store.paths(for: id).manifest])
          // Another instance (another process's, in effect): its writable open stamps once.
          let other = try ShardedStore(root: store.root, chunkSize: store.chunkSize, durability: .relaxed)
          let writer = try FileHandleAssetDataManager(store: other, id: id, deferringCreation: deferring)
          try writer.close()
          #expect(counter.stamped == [store.paths(for: id).manifest, store.paths(for: id).manifest])
        }
      }
    }

    /// Once its first commit has made the manifest, a read of the object through the handle that committed it
    /// stamps it (the handle learns that its manifest is on disk from its own commit), and so does a read
    /// through a handle opened before that commit, which learns it from the disk (looking for chunks it lacks).
    @Test func aNewObjectsReadsStampItsManifestOnceItIsCommitted() async throws {
      try await withStore { store in
        let id = CacheKey("https://recency.example/committed").objectID
        let manifest = store.paths(for: id).manifest
        let bytes = Data(randomBytes(count: 8192, seed: 9))
        let counter = TouchCounter(root: store.root)
        // The second handle through another store instance: its own once-a-minute stamp.
        let other = try ShardedStore(root: store.root, chunkSize: store.chunkSize, durability: .relaxed)
        try await withIOFaultHandler(counter) {
          let policy = FileHandleAssetDataManager.CommitPolicy(interval: .seconds(3600))
          let first = try FileHandleAssetDataManager(store: store, id: id, commitPolicy: policy)
          let second = try FileHandleAssetDataManager(store: other, id: id, commitPolicy: policy)
          try first.setContentLength(8192)
          try first.write(bytes.prefix(4096), at: 0)
          #expect(try first.read(0..<4096) == bytes.prefix(4096))
          #expect(counter.paths.isEmpty)
          try first.flush()
          #expect(try first.read(0..<4096) == bytes.prefix(4096))
          #expect(counter.stamped == [manifest])
          #expect(try second.read(0..<4096) == bytes.prefix(4096))
          #expect(counter.stamped == [manifest, manifest])
          try second.close()
          try first.close()
        }
      }
    }
  }
}
