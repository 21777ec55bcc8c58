import Foundation
import MediaCache
import MediaCacheStreaming
import MediaCacheTestSupport
import Testing

@testable import cache_compactor

/// `cache-compactor --keep-heads`: under a size limit the tails of idle objects go before whole objects, so
/// every object that survives keeps its start (a partly watched or preloaded video still starts at once).
@Suite(.serialized)
struct HeadKeepingTests {
  let compactor = binary("cache-compactor")
  let chunkSize = 4096
  let size = 40_000
  let head = 8192

  /// `count` complete objects `obj-0…` of `size` bytes, recency stamps a minute apart, obj-0 least recent.
  func makeTree(_ cache: String, count: Int) throws -> (ShardedStore, [Double]) {
    let store = try ShardedStore(root: cache, chunkSize: chunkSize, durability: .relaxed)
    var stamps: [Double] = []
    let start = Date().timeIntervalSince1970 - 86400
    for index in 0..<count {
      let id = CacheKey("obj-\(index)").objectID
      let manager = try FileHandleAssetDataManager(store: store, id: id)
      try manager.setContentLength(Int64(size))
      try manager.write(content(index), at: 0)
      try manager.close()
      stamps.append(start + Double(index) * 60)
      try FileManager.default.setAttributes(
        [.modificationDate: Date(timeIntervalSince1970: stamps[index])],
        ofItemAtPath: store.paths(for: id).manifest)
    }
    return (store, stamps)
  }

  func content(_ index: Int) -> Data { randomBytes(count: size, seed: UInt64(index + 1)) }
  func id(_ index: Int) -> ObjectID { CacheKey("obj-\(index)").objectID }

  func pass(_ arguments: [String]) async throws -> CompactionReport {
    let result = try await run(compactor, arguments + ["--json"])
    #expect(result.status == 0, "\(result.stderr)")
    let line = try #require(result.text.split(separator: "\n").first)
    return try decodeReport(PassReport.self, Data(line.utf8)).report
  }

  func modified(_ path: String) throws -> Double {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return try #require(attributes[.modificationDate] as? Date).timeIntervalSince1970
  }

  @Test func tailsGoFirstLeastRecentFirstAndHeadsStayReadable() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let (store, stamps) = try makeTree(cache, count: 8)
    let total = try (0..<8).reduce(Int64(0)) { $0 + (try store.diskUsage(id($1))) }
    // A limit that cutting about two and a half tails meets (each frees 8 of its 10 chunks).
    let tail = Int64(size - head)
    let limit = Int64(Double(total - tail * 5 / 2) / 0.9)
    let arguments = [cache, "--max-size", "\(limit)", "--keep-heads", "\(head)", "--max-age", "1000d"]

    let before = try (0..<8).map { try Data(contentsOf: URL(fileURLWithPath: store.paths(for: id($0)).data)) }
    let dry = try await pass(arguments + ["--dry-run"])
    #expect(dry.trimmed.map(\.id) == [id(0), id(1), id(2)])
    #expect(
      try (0..<8).map { try Data(contentsOf: URL(fileURLWithPath: store.paths(for: id($0)).data)) } == before)

    let report = try await pass(arguments)
    // The three least recently used lost their tails; nothing was evicted whole.
    #expect(report.trimmed.map(\.id) == [id(0), id(1), id(2)])
    #expect(report.trimmed.allSatisfy { $0.keptHead == Int64(head) && $0.bytes >= tail - Int64(chunkSize) })
    #expect(report.removed.isEmpty && report.evictedCount == 0)
    #expect(report.bytesAfter <= Int64(Double(limit) * 0.9))
    #expect(report.bytesFreed == report.trimmed.reduce(0) { $0 + $1.bytes })
    for index in 0..<8 {
      let manifest = try #require(try store.readManifest(id(index)))
      let dataPath = store.paths(for: id(index)).data
      if index < 3 {
        // The head window is all there, byte for byte; nothing past it is listed or on disk.
        #expect(manifest.presentChunks == ChunkSet([0..<2]), "obj-\(index)")
        #expect(manifest.contentLength == Int64(size))
        #expect(try Data(contentsOf: URL(fileURLWithPath: dataPath)).count == head)
        // A cut is not an access: the object keeps its place in the recency order. (Checked before the open
        // below, an access, which stamps the manifest.)
        #expect(abs(try modified(store.paths(for: id(index)).manifest) - stamps[index]) < 1)
        let manager = try FileHandleAssetDataManager(store: store, id: id(index), writable: false)
        #expect(try manager.read(0..<Int64(head)) == content(index).prefix(head))
        #expect(throws: StoreError.self) { try manager.read(Int64(head)..<Int64(head + 1)) }
        try manager.close()
        // That open was an access: stamped now.
        #expect(try modified(store.paths(for: id(index)).manifest) > stamps[index] + 60)
      } else {
        #expect(manifest.isComplete, "obj-\(index)")
      }
    }
    // The tree is clean for cache-fsck, and a cut object fills again to the same bytes.
    let fsck = try await run(binary("cache-fsck"), [cache])
    #expect(fsck.status == 0, "\(fsck.text) \(fsck.stderr)")
    let refill = try FileHandleAssetDataManager(store: store, id: id(0))
    try refill.write(content(0).suffix(from: head), at: Int64(head))
    #expect(try refill.read(0..<Int64(size)) == content(0))
    try refill.close()
    #expect(try store.readManifest(id(0))?.isComplete == true)
  }

  @Test func wholeObjectsGoOnlyAfterEveryTail() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let (store, _) = try makeTree(cache, count: 4)
    // Half an object: the four cut tails are not enough, so the least recent cut objects go whole after.
    let limit = try store.diskUsage(id(0)) / 2
    let report = try await pass([cache, "--max-size", "\(limit)", "--keep-heads", "\(head)"])
    #expect(report.trimmed.map(\.id) == (0..<4).map(id))
    #expect(!report.removed.isEmpty)
    #expect(report.removed.map(\.id) == (0..<report.removed.count).map(id))
    #expect(report.bytesAfter <= Int64(Double(limit) * 0.9))
    for index in report.removed.count..<4 {
      #expect(try store.readManifest(id(index))?.presentChunks == ChunkSet([0..<2]))
    }
  }

  @Test func busyAndPinnedObjectsKeepTheirTails() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let (store, _) = try makeTree(cache, count: 3)
    let pinned = try FileHandleAssetDataManager(store: store, id: id(1))
    try pinned.setPinned(true)
    try pinned.close()
    let holder = try ChildProcess(binary("mediacache-testhelper"), ["hold", cache, "obj-0"])
    #expect(await holder.waitForLine { $0 == "holding" })
    let report = try await pass([cache, "--max-size", "1", "--keep-heads", "\(head)"])
    holder.closeInput()
    #expect(await holder.wait().status == 0)
    #expect(report.trimmed.map(\.id) == [id(2)])
    #expect(report.removed.map(\.id) == [id(2)])
    #expect(report.skippedBusy == 1 && report.pinnedKept == 1)
    #expect(try store.readManifest(id(0))?.isComplete == true)
    #expect(try store.readManifest(id(1))?.isComplete == true)
  }

  /// A planner's ranges are kept wherever they lie (rounded out to chunks): the chunks between are unlisted and
  /// their blocks freed (a hole), the file keeps its length, and an object the planner has nothing for keeps
  /// its first `bytes`. `mediaStart` plans nothing for bytes that are not an MP4: those keep the byte window.
  @Test func aPlannersRangesAreKeptWhereverTheyLie() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let (store, _) = try makeTree(cache, count: 3)
    let planned = id(0)
    let window = HeadWindow(bytes: Int64(head), description: "test") { object in
      object.id == planned ? [100..<200, 30_000..<Int64(40_000)] : nil
    }
    // About 70 000 bytes to free: the three cuts (about 24 000 + 32 000 + 32 000), no whole object.
    let total = try (0..<3).reduce(Int64(0)) { $0 + (try store.diskUsage(id($1))) }
    let limit = Int64(Double(total - 70_000) / 0.9)
    let report = try Compactor(
      store: store, policy: CompactionPolicy(maxSize: limit, maxAge: nil, keepHeads: window)
    ).runPass()
    #expect(report.removed.isEmpty)
    #expect(report.trimmed.map(\.id) == [id(0), id(1), id(2)])
    #expect(report.trimmed[0].keptRanges == [0..<4096, 28_672..<40_000])
    #expect(report.trimmed[0].keptHead == 4096)
    #expect(report.trimmed[1].keptRanges == [0..<Int64(head)])
    let manifest = try #require(try store.readManifest(planned))
    #expect(manifest.presentChunks == ChunkSet([0..<1, 7..<10]))
    let dataPath = store.paths(for: planned).data
    let status = try #require(try FileManager.default.attributesOfItem(atPath: dataPath)[.size] as? Int)
    #expect(status == size)
    var info = stat()
    #expect(stat(dataPath, &info) == 0)
    // Chunk 0 and chunks 7-9 (about 16 KiB) allocated, not the 40 000 bytes before the cut.
    #expect(Int(info.st_blocks) * 512 <= 6 * chunkSize, "\(info.st_blocks) blocks")
    let manager = try FileHandleAssetDataManager(store: store, id: planned, writable: false)
    #expect(try manager.read(0..<4096) == content(0).prefix(4096))
    #expect(try manager.read(28_672..<40_000) == content(0).subdata(in: 28_672..<40_000))
    #expect(throws: StoreError.self) { try manager.read(4096..<4097) }
    try manager.close()
    let fsck = try await run(binary("cache-fsck"), [cache])
    #expect(fsck.status == 0, "\(fsck.text) \(fsck.stderr)")

    // Random bytes are not an MP4: mediaStart keeps its byte window (here larger than the objects: no cut).
    let (other, _) = try makeTree(dir.file("other"), count: 2)
    let media = try Compactor(
      store: other, policy: CompactionPolicy(maxSize: 1, maxAge: nil, keepHeads: .mediaStart(seconds: 1))
    ).runPass()
    #expect(media.trimmed.isEmpty && media.removed.count == 2)
  }

  @Test func refusesABadHeadSize() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let result = try await run(compactor, [dir.path, "--max-size", "1M", "--keep-heads", "lots"])
    #expect(result.status == 64)
    #expect(result.stderr.contains("--keep-heads 'lots' is not a window"))
  }
}
