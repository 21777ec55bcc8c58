import Foundation
import MediaCacheTestSupport
import Synchronization
import SystemPackage
import Testing

@testable import MediaCache

/// Injected ENOSPC, EIO and EACCES, once or from then on, at each place the store touches the disk. Each time:
/// the call throws `StoreError.io` naming the system call, the object's path and the errno; nothing half-written
/// becomes visible (the manifest lists only chunks whose bytes are right, no staging file is left in `tmp/` or
/// shows up as an object); another object of the same store is still served; and, once the fault is gone (at
/// once for a transient one), doing it again succeeds.
extension FaultTests {
  @Suite struct IOErrors {
    static let chunk = 4096
    static let subject = "https://origin.example/subject.mp4"
    static let bystander = "https://origin.example/bystander.mp4"

    /// Where the fault is injected.
    enum Site: String, CaseIterable, Sendable {
      case dataWrite = "data pwrite"
      case manifestWrite = "manifest staging pwrite"
      case manifestSync = "manifest staging fsync"
      case rename = "manifest rename"
      case directorySync = "shard directory fsync"
      case dataSync = "data fdatasync"
      case dataRead = "data pread"
      case manifestRead = "manifest read"

      /// The rule's operation, path pattern and the system call the error must name.
      func rule(_ id: ObjectID) -> (IOOperation, String, String) {
        switch self {
        case .dataWrite: (.write, "\(id.hex).data", "pwrite")
        case .manifestWrite: (.write, "tmp/\(id.hex)", "pwrite")
        case .manifestSync: (.sync, "tmp/\(id.hex)", "fsync")
        case .rename: (.rename, "tmp/\(id.hex)", "rename")
        case .directorySync:
          (.syncDirectory, String(ObjectPaths(root: "", id: id).directory.dropFirst()), "fsync")
        case .dataSync: (.syncData, "\(id.hex).data", "fdatasync")
        case .dataRead: (.read, "\(id.hex).data", "pread")
        case .manifestRead: (.read, "\(id.hex).manifest", "pread")
        }
      }

      var isRead: Bool { self == .dataRead || self == .manifestRead }
    }

    struct Fault: Sendable, CustomTestStringConvertible {
      var errno: Errno
      var persistent: Bool
      var testDescription: String { "\(errno)\(persistent ? " persistent" : " transient")" }
    }

    static let faults: [Fault] = [Errno.noSpace, .ioError, .permissionDenied].flatMap {
      [Fault(errno: $0, persistent: false), Fault(errno: $0, persistent: true)]
    }

    @Test(arguments: Site.allCases, FaultTests.IOErrors.faults)
    func faultIsTypedContainedAndRecoverable(site: Site, fault: Fault) async throws {
      try await withStore(chunkSize: Self.chunk, durability: .durable) { store in
        let subjectID = ObjectID(CacheKey(Self.subject))
        let bystanderID = ObjectID(CacheKey(Self.bystander))
        let subjectData = randomBytes(count: 3 * Self.chunk + 100, seed: 11)
        let bystanderData = randomBytes(count: 2 * Self.chunk + 7, seed: 12)
        try Self.writeWhole(bystanderData, id: bystanderID, store: store)
        if site.isRead { try Self.writeWhole(subjectData, id: subjectID, store: store) }
        VerifiedChunkCache.shared.removeAll()

        let (operation, pattern, syscall) = site.rule(subjectID)
        let injector = FaultInjector(
          root: store.root,
          rules: [
            FaultRule(
              operation: operation, pathContains: pattern, errno: fault.errno, persistent: fault.persistent)
          ])
        try await withIOFaultHandler(injector) {
          func expectTyped(_ body: () throws -> Void) {
            do {
              try body()
              Issue.record("\(site) with \(fault.testDescription): no error")
            } catch let error as StoreError where error.code == .io {
              #expect(error.message.hasPrefix("\(syscall) failed on "), "\(error)")
              #expect(error.errno == fault.errno)
              let path = error.path?.string ?? ""
              #expect(path.contains(subjectID.hex) || path.hasSuffix(pattern))
            } catch {
              Issue.record("\(site): untyped error \(error)")
            }
          }
          if site.isRead {
            expectTyped {
              let reader = try FileHandleAssetDataManager(store: store, id: subjectID, writable: false)
              defer { try? reader.close() }
              _ = try reader.read(0..<Int64(subjectData.count))
            }
          } else {
            // Opening is inside: a new object's first directory fsync comes when its data file is made.
            var manager: FileHandleAssetDataManager?
            expectTyped {
              let opened = try FileHandleAssetDataManager(
                store: store, id: subjectID, commitPolicy: .init(bytes: 1 << 30, interval: .seconds(1000)))
              manager = opened
              try opened.setContentLength(Int64(subjectData.count))
              try opened.write(subjectData, at: 0)
              try opened.flush()
            }
            try? manager?.close()
            try Self.expectNothingHalfWritten(subjectID, subjectData, store: store)
          }
          #expect((injector.fired.first ?? 0) >= 1)
          // Another object keeps being served while the fault is in place.
          try Self.expectServed(bystanderData, id: bystanderID, store: store)
          if fault.persistent {
            // Still failing, and still typed.
            expectTyped { try Self.attempt(site, subjectData, id: subjectID, store: store) }
            try Self.expectNothingHalfWritten(subjectID, subjectData, store: store)
          }
        }
        // The fault is gone (at once for a transient one): doing it again succeeds.
        try Self.attempt(site, subjectData, id: subjectID, store: store)
        try Self.expectServed(subjectData, id: subjectID, store: store)
        try Self.expectServed(bystanderData, id: bystanderID, store: store)
        #expect(try store.allObjectIDs() == [subjectID, bystanderID].sorted())
      }
    }

    /// Reads the subject again or writes all of it again through a new manager.
    static func attempt(_ site: Site, _ data: Data, id: ObjectID, store: ShardedStore) throws {
      VerifiedChunkCache.shared.removeAll()
      if site.isRead {
        let reader = try FileHandleAssetDataManager(store: store, id: id, writable: false)
        defer { try? reader.close() }
        #expect(try reader.read(0..<Int64(data.count)) == data)
      } else {
        try writeWhole(data, id: id, store: store)
      }
    }

    static func writeWhole(_ data: Data, id: ObjectID, store: ShardedStore) throws {
      let manager = try FileHandleAssetDataManager(
        store: store, id: id, commitPolicy: .init(bytes: 1 << 30, interval: .seconds(1000)))
      do {
        try manager.setContentLength(Int64(data.count))
        try manager.write(data, at: 0)
        try manager.close()
      } catch {
        try? manager.close()
        throw error
      }
    }

    /// Every chunk the committed manifest lists has the source's CRC and bytes; no staging manifest is left in
    /// `tmp/`; only the two objects exist.
    static func expectNothingHalfWritten(_ id: ObjectID, _ data: Data, store: ShardedStore) throws {
      if let manifest = try? store.readManifest(id) {
        let bytes = try fileBytes(store.paths(for: id).data)
        for (index, crc) in manifest.chunkCRCs {
          let range = manifest.byteRange(ofChunk: index)
          let source = data[Int(range.lowerBound)..<Int(range.upperBound)]
          #expect(crc == CRC32.checksum(source), "chunk \(index) listed with a wrong CRC")
          #expect(
            bytes.count >= Int(range.upperBound)
              && bytes[Int(range.lowerBound)..<Int(range.upperBound)] == source)
        }
      }
      let staging = (try FileSystemCalls.directoryEntries(store.tmpDirectory) ?? []).filter {
        $0.hasSuffix(".manifest")
      }
      #expect(staging.isEmpty, "staging manifests left in tmp/: \(staging)")
      #expect(Set(try store.allObjectIDs()).isSubset(of: [id, ObjectID(CacheKey(bystander))]))
    }

    static func expectServed(_ data: Data, id: ObjectID, store: ShardedStore) throws {
      VerifiedChunkCache.shared.removeAll()
      let reader = try FileHandleAssetDataManager(store: store, id: id, writable: false)
      defer { try? reader.close() }
      #expect(try reader.read(0..<Int64(data.count)) == data)
    }

    /// After an fdatasync fails, the chunks it was to flush may be lost for good (Linux marks the pages clean):
    /// a later fsync that succeeds says nothing about them, so they must not be listed until written again.
    @Test func failedDataSyncInFlushForgetsItsChunks() async throws {
      try await withStore(chunkSize: Self.chunk, durability: .durable) { store in
        let id = ObjectID(CacheKey(Self.subject))
        let data = randomBytes(count: 3 * Self.chunk, seed: 21)
        let injector = FaultInjector(
          root: store.root, rules: [FaultRule(operation: .syncData, pathContains: id.hex, errno: .ioError)])
        let manager = try FileHandleAssetDataManager(
          store: store, id: id, commitPolicy: .init(bytes: 1 << 30, interval: .seconds(1000)))
        defer { try? manager.close() }
        try manager.setContentLength(Int64(data.count))
        try manager.write(data, at: 0)
        await withIOFaultHandler(injector) {
          #expect(
            throws: StoreError.io(
              operation: "fdatasync", path: FilePath(store.paths(for: id).data), errno: .ioError)
          ) {
            try manager.flush()
          }
        }
        try manager.flush()
        #expect(manager.manifest.chunkCRCs.isEmpty)
        #expect(try store.readManifest(id)?.chunkCRCs.isEmpty ?? true)
        // Written again, they are flushed and listed.
        try manager.write(data, at: 0)
        try manager.close()
        try Self.expectServed(data, id: id, store: store)
      }
    }

    /// The same for a batch committed in the background: chunks completed while its fdatasync was running
    /// were written before that sync started, so its failure may have lost them too.
    @Test func failedBackgroundDataSyncForgetsChunksWrittenBeforeIt() async throws {
      try await withStore(chunkSize: Self.chunk, durability: .durable) { store in
        let id = ObjectID(CacheKey(Self.subject))
        let data = randomBytes(count: 3 * Self.chunk, seed: 22)
        let gate = SyncGate(root: store.root)
        let manager = try FileHandleAssetDataManager(
          store: store, id: id, commitPolicy: .init(bytes: Int64(Self.chunk), interval: .seconds(1000)))
        defer { try? manager.close() }
        try manager.setContentLength(Int64(data.count))
        try await withIOFaultHandler(gate) {
          // Chunk 0 completes a batch: its fdatasync starts in the background and waits at the gate.
          try manager.write(data[0..<Self.chunk], at: 0)
          #expect(gate.waitUntilSyncStarted())
          try manager.write(data[Self.chunk...], at: Int64(Self.chunk))
          gate.release()
          #expect(throws: StoreError.self) { try manager.flush() }
        }
        try manager.flush()
        #expect(manager.manifest.chunkCRCs.isEmpty, "chunks written before the failed sync are listed")
        try manager.write(data, at: 0)
        try manager.close()
        try Self.expectServed(data, id: id, store: store)
      }
    }

    /// Found by `PowerLoss/managerWritesWithBackgroundCommits` (MEDIACACHE_TORTURE_REPLAY="14848256027840714985
    /// 226 64"): the part of a chunk written before a failed fdatasync may be lost as well, but the writer kept
    /// it as a partial chunk, completed it with later bytes and listed it after the next, successful sync.
    @Test func failedDataSyncForgetsPartialChunksToo() async throws {
      try await withStore(chunkSize: Self.chunk, durability: .durable) { store in
        let id = ObjectID(CacheKey(Self.subject))
        let data = randomBytes(count: 2 * Self.chunk, seed: 23)
        let injector = FaultInjector(
          root: store.root, rules: [FaultRule(operation: .syncData, pathContains: id.hex, errno: .ioError)])
        let manager = try FileHandleAssetDataManager(
          store: store, id: id, commitPolicy: .init(bytes: Int64(Self.chunk), interval: .seconds(1000)))
        defer { try? manager.close() }
        try manager.setContentLength(Int64(data.count))
        let half = Self.chunk + Self.chunk / 2
        try await withIOFaultHandler(injector) {
          // The first half of chunk 1, then chunk 0, whose batch's fdatasync fails in the background.
          try manager.write(data[Self.chunk..<half], at: Int64(Self.chunk))
          try manager.write(data[0..<Self.chunk], at: 0)
          #expect(throws: StoreError.self) { try manager.flush() }
        }
        try manager.write(data[half...], at: Int64(half))
        try manager.flush()
        #expect(manager.manifest.chunkCRCs.isEmpty, "a chunk partly written before the failed sync is listed")
        try manager.write(data, at: 0)
        try manager.close()
        try Self.expectServed(data, id: id, store: store)
      }
    }

    /// A full disk, with limits set: `store` evicts least recently used unpinned objects and tries once more.
    @Test func noSpaceEvictsLeastRecentlyUsedAndRetries() async throws {
      try await withTemporaryDirectory { directory in
        let cache = try MediaCache(
          configuration: .init(
            directory: FilePath("\(directory)/cache"), chunkSize: Self.chunk, memoryCostLimit: 0,
            durability: .relaxed,
            maxSize: 1 << 30, maxAge: nil))
        let contents = ["pinned", "old", "recent", "new"].enumerated().map {
          ($0.element, randomBytes(count: 2 * Self.chunk + $0.offset, seed: 40 + UInt64($0.offset)))
        }
        let now = Date().timeIntervalSince1970
        for (age, (key, data)) in zip([3000.0, 2000, 1000], contents.prefix(3)) {
          try await cache.store(data, for: key, policy: .diskOnly)
          if key == "pinned" { try await cache.pin(key) }
          try FileSystemCalls.setModificationTime(
            cache.store.paths(for: cache.objectID(for: key)).manifest, seconds: now - age)
        }
        let full = DiskFullUntilFreed(root: cache.store.root)
        try await withIOFaultHandler(full) {
          try await cache.store(contents[3].1, for: "new", policy: .diskOnly)
        }
        #expect(full.failures > 0)
        #expect(try await cache.status(for: "old") == .none)
        for (key, data) in contents where key != "old" {
          #expect(try await cache.data(for: key, policy: .diskOnly) == data, "\(key)")
        }
      }
    }

    /// Without limits the app did not ask for evictions: ENOSPC is reported as it is.
    @Test func noSpaceWithoutLimitsIsReported() async throws {
      try await withTemporaryDirectory { directory in
        let cache = try MediaCache(
          configuration: .init(
            directory: FilePath("\(directory)/cache"), chunkSize: Self.chunk, memoryCostLimit: 0,
            durability: .relaxed,
            maxSize: nil, maxAge: nil))
        try await cache.store(randomBytes(count: 100, seed: 1), for: "old", policy: .diskOnly)
        let full = DiskFullUntilFreed(root: cache.store.root)
        let error = await withIOFaultHandler(full) {
          await #expect(throws: StoreError.self) {
            try await cache.store(randomBytes(count: 100, seed: 2), for: "new", policy: .diskOnly)
          }
        }
        guard error?.code == .io, error?.errno == .noSpace else {
          Issue.record("expected ENOSPC, got \(String(describing: error))")
          return
        }
        #expect(try await cache.status(for: "old") == .complete(length: 100))
      }
    }

    /// The manifest's own read used to go through Foundation, which reported every failure as a generic EIO
    /// "read": the errno (EACCES, ENOSPC…) and the failing call were lost.
    @Test func manifestReadErrorKeepsItsErrno() async throws {
      try await withStore(chunkSize: Self.chunk, durability: .relaxed) { store in
        let id = ObjectID(CacheKey(Self.subject))
        try Self.writeWhole(randomBytes(count: 100, seed: 3), id: id, store: store)
        let injector = FaultInjector(
          root: store.root,
          rules: [FaultRule(operation: .open, pathContains: "\(id.hex).manifest", errno: .permissionDenied)])
        await withIOFaultHandler(injector) {
          #expect(
            throws: StoreError.io(
              operation: "open", path: FilePath(store.paths(for: id).manifest), errno: .permissionDenied)
          ) {
            _ = try store.readManifest(id)
          }
        }
      }
    }
  }
}

/// Holds the first fdatasync under `root` until released, then fails it with EIO.
final class SyncGate: IOFaultHandler {
  let root: String
  private let started = DispatchSemaphore(value: 0)
  private let proceed = DispatchSemaphore(value: 0)
  private let used = Mutex(false)

  init(root: String) { self.root = root }

  func waitUntilSyncStarted() -> Bool { started.wait(timeout: .now() + 10) == .success }
  func release() { proceed.signal() }

  func before(_ event: IOEvent) throws(Errno) -> (any Sendable)? {
    guard event.path.hasPrefix(root), event.operation == .syncData else { return nil }
    let first = used.withLock { used in
      defer { used = true }
      return !used
    }
    guard first else { return nil }
    started.signal()
    _ = proceed.wait(timeout: .now() + 10)
    throw .ioError
  }

  func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?) {}
}

/// A full disk: every write under `root` fails with ENOSPC until an object's data file is unlinked.
final class DiskFullUntilFreed: IOFaultHandler {
  let root: String
  private let state = Mutex((full: true, failures: 0))

  init(root: String) { self.root = root }

  var failures: Int { state.withLock { $0.failures } }

  func before(_ event: IOEvent) throws(Errno) -> (any Sendable)? {
    guard event.path.hasPrefix(root), event.operation == .write else { return nil }
    let fail = state.withLock { state in
      if state.full { state.failures += 1 }
      return state.full
    }
    if fail { throw .noSpace }
    return nil
  }

  func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?) {
    if event.path.hasPrefix("\(root)/objects/"), event.operation == .unlink, event.path.hasSuffix(".data"),
      error == nil
    {
      state.withLock { $0.full = false }
    }
  }
}

extension FaultTests.IOErrors {
  /// A new object's data file is created under a staging name in `tmp/` and linked into place; errors of the
  /// writer used to name the staging file, which no longer exists, instead of the object's data file.
  @Test func errorsOfANewObjectNameItsDataFile() async throws {
    try await withStore(chunkSize: Self.chunk, durability: .durable) { store in
      let id = ObjectID(CacheKey(Self.subject))
      let manager = try FileHandleAssetDataManager(store: store, id: id)
      defer { try? manager.close() }
      let injector = FaultInjector(
        root: store.root, rules: [FaultRule(operation: .write, pathContains: "", errno: .ioError)])
      await withIOFaultHandler(injector) {
        #expect(
          throws: StoreError.io(
            operation: "pwrite", path: FilePath(store.paths(for: id).data), errno: .ioError)
        ) {
          try manager.write(randomBytes(count: 10, seed: 1), at: 0)
        }
      }
    }
  }
}
