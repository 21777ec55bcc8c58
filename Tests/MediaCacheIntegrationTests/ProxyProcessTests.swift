import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

@testable import mediacache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A running `mediacache proxy` process.
struct ProxyProcess {
  let child: ChildProcess
  let port: Int

  /// Starts the real binary on port 0 and waits for its `listening on` line, which must be the first.
  ///
  /// Every proxy of the tests runs with `MEDIACACHE_BLOCKING_CHECK=trap`: a blocking file-system call in a
  /// Swift task or on an event loop stops it with that call named on standard error, and the test fails
  /// (`withProxy` expects exit status 0).
  init(cache: String, _ extra: [String] = [], blockingCheck: String = "trap") async throws {
    var environment = ProcessInfo.processInfo.environment
    environment["MEDIACACHE_BLOCKING_CHECK"] = blockingCheck
    child = try ChildProcess(
      binary("mediacache"), ["proxy", "--cache", cache, "--port", "0"] + extra, environment: environment)
    let prefix = "listening on http://127.0.0.1:"
    guard await child.waitForLine(timeout: 30, { $0.hasPrefix(prefix) }) else {
      let result = await child.wait(timeout: 5)
      throw RawHTTPError(description: "proxy did not start: \(result.stderr)")
    }
    let first = child.outputSoFar.split(separator: "\n").first ?? ""
    guard first.hasPrefix(prefix), let port = Int(first.dropFirst(prefix.count)) else {
      throw RawHTTPError(description: "first line was '\(first)'")
    }
    self.port = port
  }

  var pid: String { "\(child.pid)" }

  func request(_ path: String, method: String = "GET", headers: [(String, String)] = []) throws
    -> RawHTTPResponse
  {
    let connection = try RawHTTPConnection(port: port)
    defer { connection.close() }
    try connection.sendRequest(method, path, headers: headers)
    return try connection.readResponse(method: method)
  }

  /// Sends `signal` and returns the exit status (the test fails if it takes more than 15 s).
  func stop(_ signal: Int32 = SIGTERM) async -> CommandResult {
    child.kill(signal)
    return await child.wait(timeout: 15)
  }
}

@Suite(.serialized) struct ProxyProcessTests {
  @Test func commandPrintsItsAddressServesAndStopsOnSignals() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    for signal in [SIGTERM, SIGINT] {
      let proxy = try await ProxyProcess(cache: directory.path)
      let url = origin.url(.normal, "cli-\(signal)", size: 300_000)
      let response = try proxy.request(ProxyServer.proxyPath(for: url))
      #expect(response.status == 200)
      let cliBody = sameBytes(response.body, TestOrigin.bytes(name: "cli-\(signal)", size: 300_000))
      #expect(cliBody.equal, "\(cliBody)")
      let result = await proxy.stop(signal)
      #expect(result.status == 0, "exit after signal \(signal): \(result.stderr)")
      #expect(
        try await MediaCache(configuration: .init(directory: FilePath(directory.path))).status(for: url)
          == .complete(length: 300_000))
    }
    // A port in use is a clear failure, a bad port a usage error.
    let holder = try await ProxyProcess(cache: directory.path)
    let clash = try await run(
      binary("mediacache"), ["proxy", "--cache", directory.path, "--port", "\(holder.port)"])
    #expect(clash.status == 1)
    #expect(clash.stderr.contains("cannot serve on 127.0.0.1:\(holder.port)"))
    _ = await holder.stop()
    let bad = try await run(binary("mediacache"), ["proxy", "--cache", directory.path, "--port", "70000"])
    #expect(bad.status == 64)
  }

  /// `--chunk-size` sets the chunks of the objects the proxy caches (256 KiB: a 1.5 MiB object in 6 chunks, all
  /// present and right); a size outside 4 KiB...64 MiB is a usage error that names the range.
  @Test func chunkSizeOption() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let size = 3 << 19
    let url = origin.url(.normal, "quarter", size: size)
    let proxy = try await ProxyProcess(cache: directory.path, ["--chunk-size", "262144"])
    let response = try await blocking {
      let connection = try RawHTTPConnection(port: proxy.port)
      defer { connection.close() }
      try connection.sendRequest("GET", ProxyServer.proxyPath(for: url))
      return try connection.readResponse()
    }
    #expect(await proxy.stop().status == 0)
    #expect(response.status == 200)
    #expect(sameBytes(response.body, TestOrigin.bytes(name: "quarter", size: size)).equal)
    let inspect = try await run(binary("mediacache"), ["inspect", "--cache", directory.path, url, "--json"])
    let fields = try decodeReport(ObjectDescription.self, inspect)
    #expect(fields.chunkSize == 262_144)
    #expect(fields.chunkCount == 6 && fields.presentChunks == 6, "\(fields)")
    let bad = try await run(
      binary("mediacache"), ["proxy", "--cache", directory.path, "--chunk-size", "1000"])
    #expect(bad.status == 64)
    #expect(bad.stderr.contains("--chunk-size must be 4096...67108864 bytes, not 1000"), "\(bad.stderr)")
  }

  /// A client that stops reading, then reads 512 MiB: the proxy's memory stays flat (the origin's bytes go to
  /// disk, not to a buffer), every byte is right, and the cache checks clean afterwards.
  @Test func slowClientKeepsTheProxysMemoryFlat() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let proxy = try await ProxyProcess(cache: directory.path, ["--durability", "relaxed"])
    // Warm up (first request, first fetch) so the baseline includes the server's fixed costs.
    _ = try proxy.request(ProxyServer.proxyPath(for: origin.url(.normal, "warmup", size: 4 << 20)))
    let size = 512 << 20
    let url = origin.url(.normal, "large", size: size)
    let stream = try await streamLargeObject(
      port: proxy.port, name: "large", size: size, pid: proxy.pid, pause: .seconds(2),
      path: ProxyServer.proxyPath(for: url)
    ) {}
    #expect(stream.response.status == 200)
    #expect(stream.received == size)
    #expect(stream.mismatches == 0)
    #expect(stream.rssGrowth < 48 << 20, "proxy RSS grew \(stream.rssGrowth >> 20) MiB streaming 512 MiB")
    #expect(await proxy.stop().status == 0)
    let check = try await run(binary("cache-fsck"), [directory.path])
    #expect(check.status == 0, "\(check.text)\(check.stderr)")
  }

  /// A client that disconnects mid-body: the proxy's origin request finishes the chunk it is in (the default
  /// abandoned-request read-ahead is 0), then stops long before the end; what it completed is kept, and a later
  /// read fetches only the rest.
  @Test func disconnectMidBodyStopsTheUpstreamFetch() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let proxy = try await ProxyProcess(cache: directory.path)
    // About 3 MB/s from the origin, so the whole 24 MiB would take 8 s.
    let size = 24 << 20
    let url = origin.url(.slow, "cut", size: size, query: "delay-ms=5")
    let path = ProxyServer.proxyPath(for: url)
    try await blocking {
      let connection = try RawHTTPConnection(port: proxy.port)
      defer { connection.close() }
      try connection.sendRequest("GET", path)
      var received = 0
      _ = try? connection.readResponse { bytes in
        received += bytes.count
        if received >= 3 << 20 { connection.close() }  // the next read fails: the response ends here
      }
    }
    // The origin's response stops growing once the chunk is complete (well within a second at this rate).
    try await Task.sleep(for: .seconds(3))
    let sentAfterCut = origin.totalBodyBytes(for: "cut")
    try await Task.sleep(for: .seconds(1))
    #expect(origin.totalBodyBytes(for: "cut") == sentAfterCut, "origin still sending after the disconnect")
    // 3 MiB read, the rest of its 1 MiB chunk (the flight may be a little ahead of the client), and what was in
    // transit.
    #expect(sentAfterCut < (3 << 20) + (2 << 20) + (1 << 20))
    let finished = origin.requests(for: "cut").allSatisfy { $0.isComplete }
    #expect(finished, "the origin's response ended (cancelled)")
    // What was completed is cached; a full read fetches only from there on, and every byte is right.
    let status = try await MediaCache(configuration: .init(directory: FilePath(directory.path))).status(
      for: url)
    #expect(status.isPartial, "\(status)")
    origin.resetRecords()
    let full = try await blocking { try proxy.request(path) }
    #expect(full.status == 200)
    let cutBody = sameBytes(full.body, TestOrigin.bytes(name: "cut", size: size))
    #expect(cutBody.equal, "\(cutBody)")
    let ranges = origin.requests(for: "cut").compactMap(\.range)
    #expect(!ranges.isEmpty && ranges.allSatisfy { !$0.hasPrefix("bytes=0-") }, "\(ranges)")
    #expect(await proxy.stop().status == 0)
    let check = try await run(binary("cache-fsck"), [directory.path])
    #expect(check.status == 0, "\(check.text)\(check.stderr)")
  }

  /// With --max-size the proxy compacts as it writes: old objects go, the cache stays near the limit.
  @Test func maxSizeCompactsInProcess() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let proxy = try await ProxyProcess(cache: directory.path, ["--max-size", "\(10 << 20)"])
    for index in 0..<6 {
      let url = origin.url(.normal, "object\(index)", size: 4 << 20)
      let response = try await blocking { try proxy.request(ProxyServer.proxyPath(for: url)) }
      #expect(response.status == 200)
      try await Task.sleep(for: .milliseconds(1100))  // distinct recency (mtime) per object
    }
    let cache = try MediaCache(configuration: .init(directory: FilePath(directory.path), maxSize: nil))
    var total: Int64 = .max
    for _ in 0..<50 {
      total = try cache.store.scanObjects().reduce(0) { $0 + $1.diskBytes }
      if total <= 10 << 20 { break }
      try await Task.sleep(for: .milliseconds(200))
    }
    #expect(total <= 10 << 20, "cache holds \(total) bytes with --max-size 10 MiB")
    #expect(
      try await cache.status(for: origin.url(.normal, "object5", size: 4 << 20)) == .complete(length: 4 << 20)
    )
    #expect(try await cache.status(for: origin.url(.normal, "object0", size: 4 << 20)) == .none)
    #expect(await proxy.stop().status == 0)
  }

  /// The proxy's threads share glibc's main arena (`ProxyAllocator.tune`, set before the first thread
  /// starts): no arena heap of their own (a 64 MiB-aligned mapping of 64 MiB, read-write then reserved) after
  /// objects were fetched and served by every kind of thread. Made from `run()`, the settings came after a
  /// thread of Swift's pool had made its arena; this test found that arena there.
  @Test(.enabled(if: glibcArenasAreVisible))
  func theProxysThreadsShareOneMallocArena() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let proxy = try await ProxyProcess(cache: directory.path, ["--durability", "relaxed"])
    for index in 0..<3 {
      let path = ProxyServer.proxyPath(for: origin.url(.normal, "arena\(index)", size: 8 << 20))
      for _ in 0..<2 {  // a miss, then a hit
        let response = try await blocking { try proxy.request(path) }
        #expect(response.status == 200 && response.body.count == 8 << 20)
      }
    }
    let maps = try String(contentsOfFile: "/proc/\(proxy.pid)/maps", encoding: .utf8)
    let heaps = mallocArenaHeaps(inMaps: maps)
    #expect(heaps.isEmpty, "arena heaps besides the main arena: \(heaps)")
    #expect(await proxy.stop().status == 0)
  }
}

/// Whether this is Linux with glibc, whose arena heaps `/proc/PID/maps` shows.
let glibcArenasAreVisible: Bool = {
  #if os(Linux) && canImport(Glibc)
    return FileManager.default.fileExists(atPath: "/proc/self/maps")
  #else
    return false
  #endif
}()

/// The heaps of glibc's non-main arenas in `maps` (the text of `/proc/PID/maps`), as "start-end" ranges: a
/// heap is reserved as 64 MiB (`HEAP_MAX_SIZE` on 64-bit) aligned to its size, of which the used part is
/// read-write and the rest inaccessible, with no file behind either. The main arena grows by `brk` instead.
func mallocArenaHeaps(inMaps maps: String) -> [String] {
  let heapSize: UInt64 = 64 << 20
  struct Mapping {
    let start: UInt64
    let end: UInt64
    let permissions: Substring
    let anonymous: Bool
  }
  let mappings = maps.split(separator: "\n").compactMap { line -> Mapping? in
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    guard fields.count >= 5 else { return nil }
    let bounds = fields[0].split(separator: "-")
    guard bounds.count == 2, let start = UInt64(bounds[0], radix: 16), let end = UInt64(bounds[1], radix: 16)
    else { return nil }
    return Mapping(start: start, end: end, permissions: fields[1], anonymous: fields.count == 5)
  }
  var heaps: [String] = []
  for (index, first) in mappings.enumerated()
  where first.anonymous && first.start % heapSize == 0 && first.permissions == "rw-p" {
    var end = first.end
    var next = index + 1
    while end - first.start < heapSize, next < mappings.count, mappings[next].anonymous,
      mappings[next].start == end, mappings[next].permissions == "---p"
    {
      end = mappings[next].end
      next += 1
    }
    if end - first.start == heapSize {
      heaps.append(String(first.start, radix: 16) + "-" + String(end, radix: 16))
    }
  }
  return heaps
}

extension MediaCache.Status {
  var isPartial: Bool {
    if case .partial = self { return true }
    return false
  }
}
