import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

@testable import cache_compactor

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `cache-compactor` run as a separate process against real cache trees.
@Suite(.serialized)
struct CompactorTests {
  let compactor = binary("cache-compactor")
  let chunkSize = 4096

  /// Creates `count` complete objects `obj-0…` of `size` bytes, with recency stamps one minute apart, oldest
  /// first (obj-0 is the least recently used).
  func makeTree(_ cache: String, count: Int, size: Int, start: Double = Date().timeIntervalSince1970 - 86400)
    throws -> ShardedStore
  {
    let store = try ShardedStore(root: cache, chunkSize: chunkSize, durability: .relaxed)
    for index in 0..<count {
      let id = CacheKey("obj-\(index)").objectID
      let manager = try FileHandleAssetDataManager(store: store, id: id)
      try manager.setContentLength(Int64(size))
      try manager.write(randomBytes(count: size, seed: UInt64(index + 1)), at: 0)
      try manager.close()
      try setRecency(store, id, start + Double(index) * 60)
    }
    return store
  }

  func setRecency(_ store: ShardedStore, _ id: ObjectID, _ seconds: Double) throws {
    try FileManager.default.setAttributes(
      [.modificationDate: Date(timeIntervalSince1970: seconds)], ofItemAtPath: store.paths(for: id).manifest)
  }

  /// The passes `--json` printed, one JSON object a line, decoded into the type cache-compactor encodes.
  func passJSON(_ result: CommandResult) throws -> [PassReport] {
    try result.text.split(separator: "\n").map { try decodeReport(PassReport.self, Data($0.utf8)) }
  }

  func exists(_ store: ShardedStore, _ key: String) -> Bool {
    FileManager.default.fileExists(atPath: store.paths(for: CacheKey(key).objectID).manifest)
  }

  /// Every file path, size, modification time and content hash under `root`.
  func treeFingerprint(_ root: String) throws -> [String] {
    let enumerator = FileManager.default.enumerator(atPath: root)
    var lines: [String] = []
    while let path = enumerator?.nextObject() as? String {
      let full = "\(root)/\(path)"
      let attributes = try FileManager.default.attributesOfItem(atPath: full)
      let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
      var line = "\(path) \(attributes[.type] ?? "") \(modified)"
      if attributes[.type] as? FileAttributeType == .typeRegular {
        line += " \(CRC32.checksum(try Data(contentsOf: URL(fileURLWithPath: full))))"
      }
      lines.append(line)
    }
    return lines.sorted()
  }

  @Test func leastRecentlyUsedGoFirstDownToTheWatermark() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let store = try makeTree(cache, count: 10, size: 40_000)
    let perObject = try store.diskUsage(CacheKey("obj-0").objectID)
    // Room for 6.5 objects: the pass must go down to 90% of that, i.e. keep 5.
    let limit = perObject * 13 / 2
    let result = try await run(compactor, [cache, "--max-size", "\(limit)", "--json"])
    #expect(result.status == 0, "\(result.stderr)")
    let pass = try #require(try passJSON(result).first)
    #expect(pass.pass == 1)
    let removed = pass.report.removed
    let expectedOrder = (0..<5).map { CacheKey("obj-\($0)").objectID }
    #expect(removed.map(\.id) == expectedOrder)
    #expect(removed.allSatisfy { $0.reason == .size })
    #expect(pass.report.evicted == [.size: 5] && pass.report.evictedCount == 5)
    #expect(pass.report.bytesAfter <= Int64(Double(limit) * 0.9))
    for index in 0..<10 { #expect(exists(store, "obj-\(index)") == (index >= 5), "obj-\(index)") }
    // Under the limit now: a second pass evicts nothing.
    let again = try #require(
      try await passJSON(try run(compactor, [cache, "--max-size", "\(limit)", "--json"])).first)
    #expect(again.report.evictedCount == 0)
  }

  @Test func ageLimitPinsAndDryRun() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let now = Date().timeIntervalSince1970
    let store = try makeTree(cache, count: 6, size: 10_000, start: now - 100 * 86400)
    // obj-0…2 last used 100 days ago, obj-3…5 just now; obj-1 is pinned.
    for index in 3..<6 { try setRecency(store, CacheKey("obj-\(index)").objectID, now - 10) }
    let pinned = try FileHandleAssetDataManager(store: store, id: CacheKey("obj-1").objectID)
    try pinned.setPinned(true)
    try pinned.close()
    try setRecency(store, CacheKey("obj-1").objectID, now - 100 * 86400)

    // A dry run decides the same but changes nothing: the tree is byte-for-byte and time-for-time identical.
    let before = try treeFingerprint(cache)
    let dry = try #require(
      try await passJSON(try run(compactor, [cache, "--max-age", "90d", "--dry-run", "--json"])).first)
    #expect(dry.report.dryRun)
    #expect(dry.report.evictedCount == 2)
    #expect(dry.report.pinnedKept == 1)
    #expect(try treeFingerprint(cache) == before)

    let real = try #require(
      try await passJSON(try run(compactor, [cache, "--max-age", "90d", "--json"])).first)
    #expect(!real.report.dryRun)
    #expect(real.report.evicted == [.age: 2])
    #expect(real.report.pinnedKept == 1)
    #expect(!exists(store, "obj-0") && exists(store, "obj-1") && !exists(store, "obj-2"))
    #expect((3..<6).allSatisfy { exists(store, "obj-\($0)") })
  }

  @Test func busyObjectSurvivesUntilClosed() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let store = try makeTree(cache, count: 3, size: 20_000)
    let holder = try ChildProcess(binary("mediacache-testhelper"), ["hold", cache, "obj-0"])
    #expect(await holder.waitForLine { $0 == "holding" })
    let first = try #require(
      try await passJSON(try run(compactor, [cache, "--max-size", "1", "--json"])).first)
    #expect(first.report.skippedBusy == 1)
    #expect(first.report.evictedCount == 2)
    #expect(exists(store, "obj-0"))
    holder.closeInput()
    #expect(await holder.wait().status == 0)
    let second = try #require(
      try await passJSON(try run(compactor, [cache, "--max-size", "1", "--json"])).first)
    #expect(second.report.evictedCount == 1)
    #expect(second.report.skippedBusy == 0)
    #expect(!exists(store, "obj-0"))
  }

  @Test func readersSeeCorrectBytesOrCleanMissesWhilePassesRun() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    _ = try ShardedStore(root: cache, chunkSize: 65536)
    let source = randomBytes(count: 600_000, seed: 99)
    try source.write(to: URL(fileURLWithPath: dir.file("source")))
    let passes = try ChildProcess(
      compactor, [cache, "--max-size", "1", "--max-age", "0s", "--interval", "0.01s"])
    let reader = try ChildProcess(
      binary("mediacache-testhelper"), ["read", cache, "video", dir.file("source"), "--seconds", "3"])
    // Keep re-creating the object while it is being evicted and read.
    let deadline = Date().addingTimeInterval(3)
    var writes = 0
    while Date() < deadline {
      let writer = try await run(
        binary("mediacache-testhelper"),
        ["write", cache, "video", dir.file("source"), "--chunk-size", "65536", "--piece", "65536"])
      #expect(writer.status == 0, "\(writer.stderr)")
      writes += 1
    }
    let readResult = await reader.wait()
    passes.kill(SIGTERM)
    let passResult = await passes.wait()
    #expect(readResult.status == 0, "reader: \(readResult.text) \(readResult.stderr)")
    #expect(readResult.text.hasPrefix("reads="), "\(readResult.text)")
    #expect(passResult.status == 0, "\(passResult.stderr)")
    #expect(passResult.text.contains("evicted 1"), "the compactor never evicted the object")
    #expect(writes > 1)
  }

  @Test func killedMidPassLeavesAConsistentTree() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let store = try makeTree(cache, count: 400, size: 9000)
    for round in 0..<12 {
      let pass = try ChildProcess(compactor, [cache, "--max-size", "\(max(1, 400 - round * 30) * 12_000)"])
      try await Task.sleep(for: .microseconds(1000 + (round * 7919) % 15000))
      pass.kill(SIGKILL)
      _ = await pass.wait()
      // No manifest without its data file; every listed chunk passes its CRC.
      for object in try store.scanObjects() where object.manifestModified != nil {
        #expect(object.dataModified != nil, "manifest without data: \(object.id)")
        let scrub = try store.scrub(object.id, budget: .max, dryRun: true)
        #expect(scrub.droppedChunks.isEmpty, "\(object.id): \(scrub.droppedChunks)")
      }
    }
    // A reopened cache and a full pass see a consistent tree.
    let cacheAgain = try MediaCache(configuration: .init(directory: FilePath(cache), chunkSize: chunkSize))
    let report = try cacheAgain.compactor.runPass()
    #expect(report.bytesAfter <= report.bytesBefore)
  }

  @Test func intervalModeExitsZeroOnSIGTERM() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    _ = try makeTree(cache, count: 2, size: 5000)
    let loop = try ChildProcess(compactor, [cache, "--interval", "1h"])
    #expect(await loop.waitForLine { $0.hasPrefix("pass 1") })
    loop.kill(SIGTERM)
    let result = await loop.wait()
    #expect(result.status == 0)
    #expect(!result.text.contains("pass 2"))
  }

  /// Found by tools/soak: a pass that failed on a full disk ended `--interval` mode (exit 1), so the compactor a
  /// supervisor ran was gone when the cache needed it most. A failed pass is reported; the next one runs.
  @Test func intervalModeKeepsGoingAfterAFailedPass() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    _ = try makeTree(cache, count: 2, size: 5000)
    let loop = try ChildProcess(compactor, [cache, "--min-free", "1", "--interval", "0.05s"])
    #expect(await loop.waitForLine { $0.hasPrefix("pass 1") })
    // The cache moved away: each pass fails asking how much the file system has free (statvfs).
    try FileManager.default.moveItem(atPath: cache, toPath: "\(cache).away")
    let deadline = Date().addingTimeInterval(60)
    while loop.errorsSoFar.components(separatedBy: " failed: ").count < 4 && loop.process.isRunning
      && Date() < deadline
    {
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(loop.process.isRunning, "the compactor ended after a failed pass: \(loop.errorsSoFar)")
    // Once the cache is back, the passes succeed again.
    try FileManager.default.moveItem(atPath: "\(cache).away", toPath: cache)
    let passesBefore = loop.outputSoFar.split(separator: "\n").count
    let back = Date().addingTimeInterval(60)
    while loop.outputSoFar.split(separator: "\n").count <= passesBefore && Date() < back {
      try await Task.sleep(for: .milliseconds(10))
    }
    loop.kill(SIGTERM)
    let result = await loop.wait()
    #expect(result.status == 0, "\(result.stderr)")
    #expect(result.stderr.contains(" failed: "), "\(result.stderr)")
    #expect(
      result.text.split(separator: "\n").count > passesBefore, "no pass succeeded once the cache was back")
  }

  @Test func scrubDropsExactlyTheCorruptChunk() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let store = try makeTree(cache, count: 3, size: 10 * chunkSize)
    let id = CacheKey("obj-1").objectID
    // Plant a flipped byte in chunk 6.
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: store.paths(for: id).data))
    try handle.seek(toOffset: UInt64(6 * chunkSize + 123))
    let original = try #require(try handle.read(upToCount: 1))
    try handle.seek(toOffset: UInt64(6 * chunkSize + 123))
    try handle.write(contentsOf: Data([original[0] ^ 0x40]))
    try handle.close()

    let pass = try #require(
      try await passJSON(try run(compactor, [cache, "--scrub", "100M", "--json"])).first)
    #expect(pass.report.chunksDropped == 1)
    #expect(pass.report.droppedChunks == [id: [6]])
    #expect(pass.report.chunksScrubbed == 30)
    #expect(pass.report.bytesScrubbed == Int64(30 * chunkSize))
    let manifest = try #require(try store.readManifest(id))
    #expect(manifest.presentChunks == ChunkSet([0..<6, 7..<10]))
    #expect(try store.readManifest(CacheKey("obj-0").objectID)?.isComplete == true)

    // A small budget continues across passes from a saved cursor: three passes of 12 chunks cover 30.
    var seen = 0
    for _ in 0..<3 {
      let small = try #require(
        try await passJSON(try run(compactor, [cache, "--scrub", "\(12 * chunkSize)", "--json"])).first)
      seen += small.report.chunksScrubbed
      #expect(small.report.chunksDropped == 0)
    }
    #expect(seen >= 29)
  }

  @Test func refusesWhatIsNotACache() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let missing = try await run(compactor, [dir.file("absent"), "--max-size", "1"])
    #expect(missing.status == 1)
    #expect(missing.stderr.contains("does not exist"))
    #expect(!FileManager.default.fileExists(atPath: dir.file("absent")))
    try Data("x".utf8).write(to: URL(fileURLWithPath: dir.file("foreign.txt")))
    let foreign = try await run(compactor, [dir.path, "--max-size", "1"])
    #expect(foreign.status == 1)
    #expect(foreign.stderr.contains("not a MediaCache directory"))
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["foreign.txt"])
    // An empty directory (systemd's CacheDirectory= before the proxy's first start) is no cache yet: nothing
    // to do, exit 0, nothing made in it (it was refused as "not empty", exit 1); a file is not a directory.
    let emptyDirectory = dir.file("empty")
    try FileManager.default.createDirectory(atPath: emptyDirectory, withIntermediateDirectories: false)
    let empty = try await run(compactor, [emptyDirectory, "--max-size", "1"])
    #expect(empty.status == 0, "\(empty.stderr)")
    #expect(empty.stderr.contains("is empty: no cache there yet; nothing to do"), "\(empty.stderr)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: emptyDirectory).isEmpty)
    let file = try await run(compactor, [dir.file("foreign.txt"), "--max-size", "1"])
    #expect(file.status == 1 && file.stderr.contains("(not a directory)"), "\(file.stderr)")
    #expect(try await run(compactor, [dir.path, "--max-age", "soon"]).status == 64)
    #expect(try await run(compactor, [dir.path, "--scrub", "-5M"]).status == 64)
    // Durations no `Duration` can hold trapped (SIGILL); a pass of no time did nothing, every time.
    for arguments in [
      ["--max-age", "1e30d"], ["--max-pass-time", "1e300s"], ["--tmp-grace", "inf"],
      ["--namespace", "video:max-age=1e300s"], ["--max-pass-time", "0"],
    ] {
      let result = try await run(compactor, [dir.path, "--max-size", "1"] + arguments)
      #expect(result.status == 64, "\(arguments): \(result.status) \(result.stderr)")
      #expect(result.stderr.contains(arguments[0]), "\(arguments): \(result.stderr)")
    }
  }
}
