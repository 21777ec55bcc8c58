import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A `--fast` check looks at objects while it walks the shard directories, on several threads
/// (`CacheChecker.WalkEvaluation`); it must report exactly what looking at them one by one afterwards reports.
@Suite struct CheckerWalkTests {
  /// A complete object under `key`, closed.
  func put(_ store: ShardedStore, _ key: String, size: Int = 3000) throws -> ObjectID {
    let id = CacheKey(key).objectID
    let manager = try FileHandleAssetDataManager(store: store, id: id)
    try manager.setContentLength(Int64(size))
    try manager.write(randomBytes(count: size, seed: UInt64(key.utf8.count)), at: 0)
    try manager.close()
    return id
  }

  func fastReport(_ root: String, duringWalk: Bool) throws -> CheckReport {
    var checker = CacheChecker(root: FilePath(root), options: .init(fast: true))
    checker.evaluatesDuringWalk = duringWalk
    return try checker.run(now: 0)
  }

  @Test func aFastCheckReportsTheSameWithAndWithoutLookingDuringTheWalk() async throws {
    try await withStore { store in
      let ids = try (0..<60).map { try put(store, "https://walk.example/\($0)") }
      let clean = try fastReport(store.root, duringWalk: true)
      #expect(clean == (try fastReport(store.root, duringWalk: false)))
      #expect(clean.findings.isEmpty, "\(clean.findings)")
      #expect(clean.totals.objects == 60)
      #expect(clean.totals.complete == 60)

      // One fault of each kind the walk can meet, each on its own object.
      try flipByte(atPath: store.paths(for: ids[0]).manifest, offset: 20)  // manifest CRC
      _ = try FileSystemCalls.unlinkFile(store.paths(for: ids[1]).data)  // manifest without data
      _ = try FileSystemCalls.unlinkFile(store.paths(for: ids[2]).manifest)  // data without manifest
      #expect(truncate(store.paths(for: ids[3]).data, 100) == 0)  // short data
      _ = try FileSystemCalls.unlinkFile(store.paths(for: ids[4]).manifest)  // a FIFO instead of a manifest
      #expect(mkfifo(store.paths(for: ids[4]).manifest, 0o600) == 0)
      _ = try FileSystemCalls.unlinkFile(store.paths(for: ids[5]).manifest)  // a symlink instead of one
      #expect(symlink(store.paths(for: ids[6]).manifest, store.paths(for: ids[5]).manifest) == 0)
      // Both files of an object under a shard that is not its own.
      let wrong = ids[7].hex.hasPrefix("00") ? "01" : "00"
      let misplaced = "\(store.root)/objects/\(wrong)/\(wrong)"
      try FileManager.default.createDirectory(atPath: misplaced, withIntermediateDirectories: true)
      for path in [store.paths(for: ids[7]).data, store.paths(for: ids[7]).manifest] {
        try FileSystemCalls.renameFile(path, to: "\(misplaced)/\((path as NSString).lastPathComponent)")
      }
      try Data("?".utf8).write(to: URL(fileURLWithPath: "\(store.paths(for: ids[8]).directory)/stray.txt"))

      let walked = try fastReport(store.root, duringWalk: true)
      #expect(walked == (try fastReport(store.root, duringWalk: false)))
      let kinds = Set(walked.findings.map(\.kind))
      for kind in [
        CheckFinding.Kind.manifestChecksum, .missingData, .orphanData, .shortData, .wrongType, .misplacedFile,
        .unknownEntry,
      ] {
        #expect(kinds.contains(kind), "\(kind) not in \(walked.findings)")
      }
      // Unreadable manifests (CRC, FIFO, symlink) and the orphan do not count as objects.
      #expect(walked.totals.objects == 56)
    }
  }

  /// The walk opens a manifest it listed as a regular file; if it was replaced since, a FIFO must not block
  /// the walk and a symlink must not be followed.
  @Test func theWalkNeitherWaitsOnAFIFONorFollowsASymlink() async throws {
    try await withStore { store in
      let id = try put(store, "https://walk.example/fifo")
      let directory = store.paths(for: id).directory
      #expect(mkfifo("\(directory)/fifo.manifest", 0o600) == 0)
      #expect(symlink(store.paths(for: id).manifest, "\(directory)/link.manifest") == 0)
      let fd = try FileSystemCalls.openDirectory(directory)
      defer { FileSystemCalls.closeDescriptor(fd) }
      let checker = CacheChecker(root: FilePath(store.root), options: .init(fast: true))
      let relative = String(directory.dropFirst(store.root.count + 1))
      // Opened without waiting for a writer, then refused by its type (`fstat`).
      #expect(throws: StoreError.self) {
        try checker.readFile(named: "fifo.manifest", in: (fd, relative))
      }
      #expect(throws: SystemCallError.self) {
        try checker.readFile(named: "link.manifest", in: (fd, relative))
      }
      #expect(try checker.readFile(named: "\(id.hex).manifest", in: (fd, relative)).count > 0)
    }
  }
}
