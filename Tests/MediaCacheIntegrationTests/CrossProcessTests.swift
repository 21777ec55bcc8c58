import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Crashes, concurrent writers and in-use locks, across real processes on a real disk.
@Suite(.serialized)
struct CrossProcessTests {
  let chunkSize = 65536

  /// Every chunk the manifest lists must hold exactly the source's bytes (checked through the library, which
  /// verifies CRCs, and by recomputing the CRC from the raw data file).
  func verifyListedChunks(store: ShardedStore, key: String, source: Data) throws -> Int {
    let id = CacheKey(key).objectID
    guard let manifest = try store.readManifest(id) else { return 0 }
    let raw = try Data(contentsOf: URL(fileURLWithPath: store.paths(for: id).data))
    let manager = try FileHandleAssetDataManager(store: store, id: id, writable: false)
    defer { try? manager.close() }
    for index in manifest.presentChunks.members {
      let range = manifest.byteRange(ofChunk: index)
      let expected = source[Int(range.lowerBound)..<Int(range.upperBound)]
      #expect(raw.count >= Int(range.upperBound), "chunk \(index) listed but data file is short")
      if raw.count >= Int(range.upperBound) {
        let onDisk = raw[Int(range.lowerBound)..<Int(range.upperBound)]
        #expect(CRC32.checksum(onDisk) == manifest.crc(ofChunk: index), "chunk \(index) CRC")
      }
      #expect(try manager.read(range) == expected, "chunk \(index) bytes")
    }
    return manifest.chunkCRCs.count
  }

  @Test("a writer killed with SIGKILL leaves only chunks whose bytes match", arguments: [false, true])
  func killedWriter(durable: Bool) async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let source = randomBytes(count: 2 << 20, seed: durable ? 11 : 12)
    try source.write(to: URL(fileURLWithPath: dir.file("source.bin")))
    let cache = dir.file("cache")
    let key = "https://example.com/killed.mp4"
    var listedAfterKills: [Int] = []
    // Kill at several points: early, mid-chunk, late. Each restart continues the same object.
    for target in [40_000, 300_000, 777_777, 1_500_000, 2_000_000] {
      var arguments = [
        "write", cache, key, dir.file("source.bin"), "--chunk-size", "\(chunkSize)", "--piece", "12345",
        "--delay-ms", "1", "--commit-bytes", "\(chunkSize)",
      ]
      if durable { arguments.append("--durable") }
      let writer = try ChildProcess(binary("mediacache-testhelper"), arguments)
      // Killed on the thread that saw the line: a hop back to the test's task first lets the writer finish
      // the last 5% before the kill.
      let reached = await onOwnThread {
        let reached = writer.waitForLineOnThisThread { line in
          line.hasPrefix("wrote ") && (Int(line.dropFirst(6)) ?? 0) >= target
        }
        writer.kill(SIGKILL)
        return reached
      }
      #expect(reached, "writer output: \(writer.outputSoFar)")
      let result = await writer.wait()
      #expect(result.status != 0)
      let store = try ShardedStore(root: cache, chunkSize: chunkSize)
      listedAfterKills.append(try verifyListedChunks(store: store, key: key, source: source))
    }
    // Commits happen every chunk, so later kills must have committed something.
    #expect(listedAfterKills.last ?? 0 > 0, "chunks listed after each kill: \(listedAfterKills)")
    // A final uninterrupted run completes the object with the source's bytes.
    let finish = try await run(
      binary("mediacache-testhelper"),
      ["write", cache, key, dir.file("source.bin"), "--chunk-size", "\(chunkSize)"])
    #expect(finish.status == 0, "\(finish.stderr)")
    let store = try ShardedStore(root: cache, chunkSize: chunkSize)
    let manager = try FileHandleAssetDataManager(store: store, id: CacheKey(key).objectID, writable: false)
    defer { try? manager.close() }
    #expect(manager.manifest.isComplete)
    #expect(try manager.read(0..<Int64(source.count)) == source)
  }

  @Test("two processes writing alternate chunks at once: every committed chunk survives the merge")
  func concurrentWriters() async throws {
    for round in 0..<3 {
      let dir = try TemporaryDirectory()
      defer { dir.cleanup() }
      let source = randomBytes(count: 64 * chunkSize + 1234, seed: UInt64(100 + round))
      try source.write(to: URL(fileURLWithPath: dir.file("source.bin")))
      let cache = dir.file("cache")
      _ = try ShardedStore(root: cache, chunkSize: chunkSize)
      let key = "https://example.com/shared-\(round).mp4"
      let common = [
        cache, key, dir.file("source.bin"), "--chunk-size", "\(chunkSize)", "--piece", "\(chunkSize / 2)",
        "--commit-bytes", "\(chunkSize)",
      ]
      let even = try ChildProcess(binary("mediacache-testhelper"), ["write"] + common + ["--only", "even"])
      let odd = try ChildProcess(binary("mediacache-testhelper"), ["write"] + common + ["--only", "odd"])
      let evenResult = await even.wait()
      let oddResult = await odd.wait()
      #expect(evenResult.status == 0, "\(evenResult.stderr)")
      #expect(oddResult.status == 0, "\(oddResult.stderr)")
      let store = try ShardedStore(root: cache, chunkSize: chunkSize)
      let manifest = try #require(try store.readManifest(CacheKey(key).objectID))
      #expect(manifest.chunkCRCs.count == 65, "round \(round): \(manifest.presentChunks)")
      #expect(manifest.isComplete)
      #expect(try verifyListedChunks(store: store, key: key, source: source) == 65)
    }
  }

  @Test("an object held open by another process is not removed by rm or clear, and clear removes it after")
  func busyObjectSurvivesRemoval() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try randomBytes(count: 300_000, seed: 7).write(to: URL(fileURLWithPath: dir.file("a.bin")))
    let mediacache = binary("mediacache")
    #expect(try await run(mediacache, ["import", "--cache", cache, "held", dir.file("a.bin")]).status == 0)
    #expect(try await run(mediacache, ["import", "--cache", cache, "free", dir.file("a.bin")]).status == 0)

    let holder = try ChildProcess(binary("mediacache-testhelper"), ["hold", cache, "held"])
    #expect(await holder.waitForLine { $0 == "holding" })

    let rm = try await run(mediacache, ["rm", "--cache", cache, "held"])
    #expect(rm.status == 3)
    #expect(rm.stderr.contains("in use"))
    #expect(rm.stdout.isEmpty)
    let inProcess = try MediaCache(configuration: .init(directory: FilePath(cache)))
    await #expect(throws: StoreError.busy(CacheKey("held").objectID)) { try await inProcess.remove("held") }

    let clear = try await run(mediacache, ["clear", "--cache", cache])
    #expect(clear.status == 3)
    #expect(clear.text.contains("busy: \(CacheKey("held").objectID.hex)"))
    #expect(
      try await run(mediacache, ["status", "--cache", cache, "held"]).text == "complete 300000 bytes\n")
    #expect(try await run(mediacache, ["status", "--cache", cache, "free"]).text == "none\n")

    holder.closeInput()
    #expect(await holder.waitForLine { $0 == "released" })
    #expect(await holder.wait().status == 0)

    let clearAgain = try await run(mediacache, ["clear", "--cache", cache])
    #expect(clearAgain.status == 0, "\(clearAgain.stderr)")
    #expect(clearAgain.text.hasPrefix("freed "))
    #expect(try await run(mediacache, ["status", "--cache", cache, "held"]).text == "none\n")
    let objects = try FileManager.default.subpathsOfDirectory(atPath: "\(cache)/objects")
    #expect(objects.filter { $0.hasSuffix(".data") || $0.hasSuffix(".manifest") }.isEmpty)
  }
}
