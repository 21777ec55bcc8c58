import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `mediacache fetch` run as a separate process against an origin in this process.
@Suite(.serialized)
struct FetchCommandTests {
  let mediacache = binary("mediacache")

  @Test func killedFetchesResumeWithoutRefetchingCachedChunks() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    // About 6 s of trickle; each run is killed after 1.1-1.6 s, past the fetch's 1 s commit interval.
    let size = 12_000_000
    let url = origin.url(.slow, "resumable", size: size, query: "delay-ms=8")
    let cacheDir = dir.file("cache")
    let arguments = ["fetch", "--cache", cacheDir, "--chunk-size", "65536", "--durability", "relaxed", url]
    var generator = SystemRandomNumberGenerator()
    for round in 0..<4 {
      let before = origin.requests(for: "resumable").count
      let fetch = try ChildProcess(mediacache, arguments)
      // Timed from its request, not its start: on a loaded machine a run once made none before the kill.
      _ = await waitForRequest(origin, after: before)
      try await Task.sleep(for: .microseconds(Int.random(in: 1_100_000...1_600_000, using: &generator)))
      fetch.kill(SIGKILL)
      _ = await fetch.wait()
      // What the manifest lists is exactly right, and the next run asks only for what is missing.
      let store = try ShardedStore(root: cacheDir, chunkSize: 65536)
      let id = CacheKey(url).objectID
      let manifest = try store.readManifest(id)
      let cached = manifest?.presentByteRanges ?? ByteRangeSet()
      if let manifest {
        let manager = try FileHandleAssetDataManager(store: store, id: id, writable: false)
        for run in cached.ranges {
          let want = Data(
            TestOrigin.bytes(name: "resumable", size: size, range: Int(run.lowerBound)..<Int(run.upperBound)))
          #expect(try manager.read(run) == want, "round \(round) \(run)")
        }
        try manager.close()
        _ = manifest
      }
      let restart = try ChildProcess(mediacache, arguments)
      let requested = await waitForRequest(origin, after: before + 1)
      restart.kill(SIGKILL)
      _ = await restart.wait()
      if let firstMissing = cached.gaps(in: 0..<Int64(size)).first?.lowerBound {
        let asked = requested?.range ?? "bytes=0-"
        #expect(
          asked.hasPrefix("bytes=\(firstMissing)-"),
          "round \(round): \(String(describing: requested)), cached \(cached)")
      } else {
        #expect(requested == nil, "a complete object was fetched again")
      }
      if round == 3 { #expect(!cached.isEmpty, "nothing was committed before any kill") }
    }
    let final = try await run(mediacache, arguments)
    #expect(final.status == 0, "\(final.stderr)")
    #expect(final.text.contains("complete \(size) bytes"))
    let cat = try await run(mediacache, ["cat", "--cache", cacheDir, url])
    #expect(cat.stdout == Data(TestOrigin.bytes(name: "resumable", size: size)))
  }

  /// The request a restarted fetch sent first (the `count`-th for the object), or nil after 10 s.
  func waitForRequest(_ origin: TestOrigin, after count: Int) async -> RecordedRequest? {
    for _ in 0..<1000 {
      let requests = origin.requests(for: "resumable")
      if requests.count >= count + 1 { return requests[count] }
      try? await Task.sleep(for: .milliseconds(10))
    }
    return nil
  }

  @Test func fetchErrorsAreOneLine() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let gone = try await run(
      mediacache, ["fetch", "--cache", dir.file("c"), origin.url(.gzip, "z", size: 1000)])
    #expect(gone.status == 1)
    #expect(
      gone.stderr.split(separator: "\n").last?.contains("Content-Encoding gzip") == true, "\(gone.stderr)")
    // A chunk size out of range is a usage error (it was 1, "invalid configuration", from the cache's open).
    let chunk = try await run(
      mediacache,
      ["fetch", "--cache", dir.file("c"), "--chunk-size", "100", origin.url(.normal, "c", size: 10)])
    #expect(chunk.status == 64 && chunk.stderr.contains("--chunk-size must be"), "\(chunk.stderr)")
    // A refused connection says so (NIO's own text was "connection reset (error set): Connection refused)").
    let refused = try await run(mediacache, ["fetch", "--cache", dir.file("c"), "http://127.0.0.1:1/x"])
    #expect(refused.status == 1)
    #expect(refused.stderr.contains(": Connection refused (errno "), "\(refused.stderr)")
    let scheme = try await run(mediacache, ["fetch", "--cache", dir.file("c"), "file:///etc/passwd"])
    #expect(scheme.status == 1)
    #expect(scheme.stderr.contains("only http and https"))
    let range = try await run(
      mediacache,
      ["fetch", "--cache", dir.file("c"), "--range", "100-199", origin.url(.normal, "r", size: 1000)])
    #expect(range.status == 0, "\(range.stderr)")
    #expect(
      try await run(
        mediacache,
        ["cat", "--cache", dir.file("c"), origin.url(.normal, "r", size: 1000), "--range", "100-199"]
      ).stdout
        == Data(TestOrigin.bytes(name: "r", size: 1000, range: 100..<200)))
  }

  /// A fetch whose commit fails (the cache's `tmp/` not writable: run as `nobody` through setpriv, as root
  /// permission bits do not apply) fails; an empty object is said to be so.
  @Test func fetchesIntoACacheWhoseTmpIsNotWritable() async throws {
    guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return }
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    #expect(chmod(dir.path, 0o755) == 0)
    let cache = dir.file("c")
    func fetchAsNobody(_ url: String) async throws -> CommandResult {
      try await run(
        "/usr/bin/setpriv",
        ["--reuid=65534", "--regid=65534", "--clear-groups", mediacache, "fetch", "--cache", cache, url])
    }
    try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: false)
    #expect(chown(cache, 65534, 65534) == 0)
    let first = try await fetchAsNobody(origin.url(.normal, "some", size: 100))
    #expect(first.status == 0, "\(first.stderr)")
    #expect(chmod("\(cache)/tmp", 0o555) == 0)
    // Bytes to write: their file cannot be made in `tmp/`, exit 1 saying so.
    let uncommitted = try await fetchAsNobody(origin.url(.normal, "written", size: 5000))
    #expect(uncommitted.status == 1, "\(uncommitted.text) \(uncommitted.stderr)")
    #expect(uncommitted.stderr.contains("Permission denied"), "\(uncommitted.stderr)")
    // An empty object answered with 200 and no bytes (`norange`), whose commit fails: said to be empty, and
    // that nothing was stored (it said "cached ...: none").
    let empty = try await fetchAsNobody(origin.url(.norange, "nothing-200", size: 0))
    #expect(empty.status == 0, "\(empty.text) \(empty.stderr)")
    #expect(empty.text.contains("empty (the origin has no bytes of it; nothing stored)"), "\(empty.text)")
    // One answering `416 bytes */0` (`normal`): empty, and nothing to store, so nothing to commit.
    let refused = try await fetchAsNobody(origin.url(.normal, "nothing", size: 0))
    #expect(refused.status == 0, "\(refused.text) \(refused.stderr)")
    #expect(refused.text.contains("empty (the origin has no bytes of it; nothing stored)"), "\(refused.text)")
  }
}
