import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Groups: representations of one item (or everything of one account) removed together, found through the
/// group index without a walk; the manifest field (format 1.2) and the index checked by `CacheChecker`.
@Suite struct GroupTests {
  func open(_ directory: String) throws -> MediaCache {
    try MediaCache(
      configuration: MediaCache.Configuration(
        directory: FilePath("\(directory)/cache"), chunkSize: 4096, memoryCostLimit: 1 << 20,
        durability: .durable, maxSize: nil, maxAge: nil))
  }

  @Test func removingAGroupRemovesItsMembersPinnedOnesTooAndLeavesBusyOnes() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory)
      for name in ["preview", "thumbnail", "video", "busy"] {
        try await cache.store(
          randomBytes(count: 9000, seed: UInt64(name.count)), for: "file-1/\(name)", group: "file-1")
      }
      try await cache.store(randomBytes(count: 5000, seed: 7), for: "file-2/video", group: "file-2")
      try await cache.store(randomBytes(count: 5000, seed: 8), for: "loose")
      try await cache.pin("file-1/video")
      let members = ["preview", "thumbnail", "video", "busy"].map { cache.objectID(for: "file-1/\($0)") }
      #expect(try await cache.objects(inGroup: "file-1") == members.sorted())
      #expect(try cache.store.readManifest(members[0])?.group == "file-1")

      let holder = try cache.assetDataManager(for: "file-1/busy", writable: false)
      let events = cache.events()
      let report = try await cache.remove(group: "file-1")
      try holder.close()
      #expect(report.objectsRemoved == 3)
      #expect(report.busy == [cache.objectID(for: "file-1/busy")])
      #expect(report.memoryBytesFreed == 27_000 + 9000)
      for name in ["preview", "thumbnail", "video"] {
        #expect(try await cache.status(for: "file-1/\(name)") == .none)
      }
      #expect(try await cache.data(for: "file-1/busy")?.count == 9000)
      #expect(try await cache.data(for: "file-2/video")?.count == 5000)
      #expect(try await cache.data(for: "loose")?.count == 5000)
      var iterator = events.makeAsyncIterator()
      guard case .removed(let removed) = await iterator.next() else {
        Issue.record("no removal event")
        return
      }
      #expect(Set(removed.map(\.id)) == Set(members.prefix(3)))
      #expect(removed.allSatisfy { $0.reason == .manual })

      // The busy member stays in the group (and its entry in the index) and goes once it is free.
      #expect(try await cache.objects(inGroup: "file-1") == [cache.objectID(for: "file-1/busy")])
      let second = try await cache.remove(group: "file-1")
      #expect(second.objectsRemoved == 1 && second.busy.isEmpty)
      #expect(try await cache.objects(inGroup: "file-1").isEmpty)
      #expect(!FileManager.default.fileExists(atPath: cache.store.groupDirectories("file-1").directory))
      #expect(try await cache.remove(group: "file-1").objectsRemoved == 0)
      #expect(try await cache.objects(inGroup: "file-2") == [cache.objectID(for: "file-2/video")])
    }
  }

  @Test func anObjectThatLeftTheGroupIsKeptAndItsStaleEntryDropped() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory)
      try await cache.store(randomBytes(count: 6000, seed: 1), for: "a", group: "user-1")
      try await cache.store(randomBytes(count: 6000, seed: 2), for: "b", group: "user-1")
      // Moving an object to another group removes its old entry once the manifest says so.
      try await cache.setGroup("user-2", for: "b")
      #expect(try await cache.objects(inGroup: "user-1") == [cache.objectID(for: "a")])
      #expect(try cache.store.groupEntries("user-1") == [cache.objectID(for: "a")])
      // An entry the manifest does not back (a crash between the two) is not a member: kept, entry dropped.
      try cache.store.addGroupEntry(cache.objectID(for: "b"), group: "user-1")
      try cache.store.addGroupEntry(ObjectID(CacheKey("never-stored")), group: "user-1")
      let report = try await cache.remove(group: "user-1")
      #expect(report.objectsRemoved == 1)
      #expect(try await cache.data(for: "b")?.count == 6000)
      #expect(try cache.store.groupEntries("user-1").isEmpty)
      // Leaving every group; a removal by key drops the entry too.
      try await cache.setGroup(nil, for: "b")
      #expect(try cache.store.readManifest(cache.objectID(for: "b"))?.group == nil)
      #expect(try cache.store.groupEntries("user-2").isEmpty)
      try await cache.store(randomBytes(count: 100, seed: 3), for: "c", group: "user-3")
      try await cache.remove("c")
      #expect(try cache.store.groupEntries("user-3").isEmpty)
      await #expect(throws: StoreError.notFound(cache.objectID(for: "nothing"))) {
        try await cache.setGroup("user-3", for: "nothing")
      }
    }
  }

  @Test func badGroupNamesAreTypedErrorsThatChangeNothing() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory)
      try await cache.store(randomBytes(count: 3000, seed: 1), for: "kept", group: "g")
      let long = String(repeating: "é", count: 128)  // 256 bytes of UTF-8
      await #expect(throws: StoreError.fieldTooLarge(field: "group", size: 256, limit: 255)) {
        try await cache.store(randomBytes(count: 10, seed: 2), for: "kept", group: long)
      }
      await #expect(throws: StoreError.invalidGroup("", reason: "a group name cannot be empty")) {
        try await cache.remove(group: "")
      }
      for bad in ["a\nb", "tab\there", "\u{7F}"] {
        await #expect {
          try await cache.setGroup(bad, for: "kept")
        } throws: { ($0 as? StoreError)?.code == .invalidGroup }
      }
      let manager = try cache.assetDataManager(for: "kept")
      #expect(throws: StoreError.fieldTooLarge(field: "group", size: 256, limit: 255)) {
        try manager.setGroup(long)
      }
      try manager.close()
      // Nothing changed: the object, its bytes and its group.
      #expect(try await cache.data(for: "kept") == randomBytes(count: 3000, seed: 1))
      #expect(try cache.store.readManifest(cache.objectID(for: "kept"))?.group == "g")
      #expect(try FileManager.default.contentsOfDirectory(atPath: cache.store.groupsDirectory).count == 1)
      // The longest name works.
      let longest = String(repeating: "x", count: 255)
      try await cache.setGroup(longest, for: "kept")
      #expect(try await cache.objects(inGroup: longest) == [cache.objectID(for: "kept")])
    }
  }

  @Test func theGroupIsOneTwoManifestFieldThatOlderManifestsLack() throws {
    let id = ObjectID(CacheKey("k"))
    var manifest = Manifest(objectID: id, chunkSize: 4096, contentLength: 10_000)
    manifest.setChunk(0, crc: 7)
    let plain = try ManifestCodec.encode(manifest)
    #expect(plain[5] == 0, "no group, no spans: written as 1.0")
    manifest.group = "account-42"
    let grouped = try ManifestCodec.encode(manifest)
    #expect(grouped[5] == 2)
    #expect(grouped.count == plain.count + 4 + 1 + 10, "span count, group length, group")
    #expect(try ManifestCodec.decode(grouped, expectedID: id) == manifest)
    #expect(try ManifestCodec.decode(plain, expectedID: id).group == nil)
    // A reader of 1.2 refuses bytes after the group; 1.4 may append some after 1.3's stored headers.
    var trailing = Array(grouped.dropLast(4)) + [0xAA]
    trailing += withUnsafeBytes(of: CRC32.checksum(trailing).littleEndian, Array.init)
    #expect(throws: ManifestError.trailingBytes(count: 1)) { try ManifestCodec.decode(Data(trailing)) }
    trailing = Array(grouped.dropLast(4)) + [UInt8](repeating: 0, count: 10) + [0xAA]
    trailing[5] = 4
    trailing += withUnsafeBytes(of: CRC32.checksum(trailing).littleEndian, Array.init)
    #expect(try ManifestCodec.decode(Data(trailing)).group == "account-42")
    // A group of invalid UTF-8 is a typed error.
    var broken = Array(grouped.dropLast(4))
    broken[broken.count - 1] = 0xFF
    broken += withUnsafeBytes(of: CRC32.checksum(broken).littleEndian, Array.init)
    #expect(throws: ManifestError.invalidField(name: "group", reason: "not valid UTF-8")) {
      try ManifestCodec.decode(Data(broken))
    }
  }

  @Test func aCacheWrittenBeforeGroupsOpensUnchangedAndTakesThem() async throws {
    try await withTemporaryDirectory { directory in
      // A layout-1.0 root, as earlier builds made it, with one object in a 1.0 manifest.
      let root = "\(directory)/cache"
      for name in ["objects", "tmp"] {
        try FileManager.default.createDirectory(atPath: "\(root)/\(name)", withIntermediateDirectories: true)
      }
      try Data("mediacache-format 1.0\n".utf8).write(to: URL(fileURLWithPath: "\(root)/FORMAT"))
      let cache = try open(directory)
      try await cache.store(randomBytes(count: 5000, seed: 1), for: "old", policy: .diskOnly)
      let manifestPath = cache.store.paths(for: cache.objectID(for: "old")).manifest
      #expect(try Data(contentsOf: URL(fileURLWithPath: manifestPath))[5] == 0)
      #expect(try CacheChecker(root: FilePath(root)).run().findings.isEmpty)

      try await cache.setGroup("later", for: "old")
      #expect(try Data(contentsOf: URL(fileURLWithPath: manifestPath))[5] == 2)
      #expect(try String(contentsOfFile: "\(root)/FORMAT", encoding: .utf8) == "mediacache-format 1.0\n")
      #expect(try CacheChecker(root: FilePath(root)).run().findings.isEmpty)
      #expect(try await cache.remove(group: "later").objectsRemoved == 1)
      #expect(try FileManager.default.contentsOfDirectory(atPath: "\(root)/groups").isEmpty)
    }
  }

  @Test func aSymlinkedGroupDirectoryIsNeverFollowed() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory)
      try await cache.store(randomBytes(count: 3000, seed: 1), for: "a")
      let id = cache.objectID(for: "a")
      // Outside the cache, a file named like a member, behind a symlink where the group's directory belongs.
      let outside = "\(directory)/outside"
      try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
      try Data("keep".utf8).write(to: URL(fileURLWithPath: "\(outside)/\(id.hex)"))
      let (shard, groupDirectory) = cache.store.groupDirectories("g")
      try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
      try FileManager.default.createSymbolicLink(atPath: groupDirectory, withDestinationPath: outside)
      #expect(try await cache.objects(inGroup: "g").isEmpty)
      #expect(try await cache.remove(group: "g").objectsRemoved == 0)
      #expect(try String(contentsOfFile: "\(outside)/\(id.hex)", encoding: .utf8) == "keep")
      #expect(try await cache.data(for: "a")?.count == 3000)
      let relative = String(groupDirectory.dropFirst(cache.store.root.count + 1))
      let check = try CacheChecker(root: FilePath(cache.store.root), options: .init(repair: true)).run()
      #expect(
        check.findings.map(\.identity) == [.init(path: relative, kind: .unknownEntry, severity: .warning)])
      #expect(FileManager.default.fileExists(atPath: "\(outside)/\(id.hex)"))
    }
  }

  @Test func theCheckerFindsAndRepairsTheIndex() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try open(directory)
      try await cache.store(randomBytes(count: 5000, seed: 1), for: "a", group: "g")
      try await cache.store(randomBytes(count: 5000, seed: 2), for: "b", group: "g")
      let a = cache.objectID(for: "a")
      let b = cache.objectID(for: "b")
      let ghost = ObjectID(CacheKey("ghost"))
      #expect(try CacheChecker(root: FilePath("\(directory)/cache")).run().findings.isEmpty)
      let groupDirectory = cache.store.groupDirectories("g").directory
      let relative = String(groupDirectory.dropFirst(cache.store.root.count + 1))
      try FileManager.default.removeItem(atPath: "\(groupDirectory)/\(b.hex)")
      try cache.store.addGroupEntry(ghost, group: "g")
      try cache.store.addGroupEntry(a, group: "other")
      try Data().write(to: URL(fileURLWithPath: "\(groupDirectory)/not-an-id"))

      let check = try CacheChecker(root: FilePath("\(directory)/cache")).run()
      let otherRelative = String(
        cache.store.groupDirectories("other").directory.dropFirst(cache.store.root.count + 1))
      #expect(
        Set(check.findings.map(\.identity)) == [
          .init(path: "\(relative)/\(b.hex)", kind: .missingGroupEntry),
          .init(path: "\(relative)/\(ghost.hex)", kind: .staleGroupEntry),
          .init(path: "\(otherRelative)/\(a.hex)", kind: .staleGroupEntry),
          .init(path: "\(relative)/not-an-id", kind: .unknownEntry, severity: .warning),
        ])
      #expect(check.exitStatus == 4)
      let repair = try CacheChecker(root: FilePath("\(directory)/cache"), options: .init(repair: true)).run()
      #expect(repair.exitStatus == 1)
      let recheck = try CacheChecker(root: FilePath("\(directory)/cache")).run()
      #expect(recheck.findings.map(\.kind) == [.unknownEntry])
      #expect(try cache.store.groupEntries("g") == [a, b].sorted())
      #expect(try cache.store.groupEntries("other").isEmpty)
      #expect(try await cache.remove(group: "g").objectsRemoved == 2)
    }
  }
}
