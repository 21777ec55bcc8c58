import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// Races and edge cases found in review of the origin-fetching code: each failed before its fix.
@Suite(.serialized)
struct FetchRegressionTests {
  static let cs = 65536

  func mk(_ dir: String) throws -> MediaCache {
    try MediaCache(configuration: .init(directory: FilePath(dir), chunkSize: Self.cs, durability: .relaxed))
  }

  // R1: a reader in "process A" mixes bytes of two origin versions after "process B" reset the object.
  @Test func crossProcessResetMixesVersions() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    let size = 8 * Self.cs
    let url = origin.url(.normal, "mix", size: size)
    let cacheA = try mk(dir.file("cache"))
    let cacheB = try mk(dir.file("cache"))
    let clientA = OriginClient(); let clientB = OriginClient()
    let readerA = CachingReader(cache: cacheA, client: clientA)
    let readerB = CachingReader(cache: cacheB, client: clientB)
    // A caches the first half (v0).
    do {
      let b = try await readerA.read(url, range: .bounded(0..<Int64(4 * Self.cs)))
      for try await _ in b {}
      b.close()
    }
    let bytes = try await readerA.read(url)
    var it = bytes.makeAsyncIterator()
    var out = Data()
    out.append(try #require(try await it.next()))  // chunk 0, v0
    origin.setVersion(name: "mix", to: 1)
    // B fetches the missing half: the origin answers 200 v1, B resets and fills.
    for try await _ in readerB.prefetch(url) {}
    var failure: (any Error)?
    do {
      while let piece = try await it.next() { out.append(piece) }
    } catch { failure = error }
    bytes.close()
    let v0 = Data(TestOrigin.bytes(name: "mix", size: size, version: 0, range: 0..<size))
    let v1 = Data(TestOrigin.bytes(name: "mix", size: size, version: 1, range: 0..<size))
    #expect(failure != nil || out == v0 || out == v1, "mixed versions served without error")
    try await clientA.shutdown(); try await clientB.shutdown(); try await origin.shutdown()
  }

  // R2: cancelling a prefetch does not stop the origin request.
  @Test func cancelledPrefetchKeepsDownloading() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    let size = 6_000_000
    let url = origin.url(.slow, "pf", size: size, query: "delay-ms=5")
    let cache = try mk(dir.file("cache"))
    let client = OriginClient()
    let reader = CachingReader(cache: cache, client: client)
    let task = Task {
      var n = 0
      for try await p in reader.prefetch(url) { n += 1; if p.cachedBytes > 0 && n > 1 { break } }
    }
    try await Task.sleep(for: .milliseconds(500))
    task.cancel()
    _ = try? await task.value
    let at = origin.totalBodyBytes(for: "pf")
    try await Task.sleep(for: .seconds(2))
    let later = origin.totalBodyBytes(for: "pf")
    let disc = origin.requests(for: "pf").contains { $0.clientDisconnected }
    #expect(later == at || disc, "prefetch still downloading after cancel")
    await reader.cancelAll()
    try await client.shutdown(); try await origin.shutdown()
  }

  // R3: a chunk dropped behind a running flight: the reader spins joining that flight until it ends.
  @Test func droppedChunkBehindRunningFlightSpins() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    let size = 4_000_000
    // 16 KiB per 40 ms: the whole object takes 10 s, far longer than the second read even on a loaded machine.
    let url = origin.url(.slow, "spin", size: size, query: "delay-ms=40")
    let cache = try mk(dir.file("cache"))
    let client = OriginClient()
    let reader = CachingReader(cache: cache, client: client)
    let r1 = try await reader.read(url)
    var it1 = r1.makeAsyncIterator()
    var got = 0
    while got < 3 * Self.cs { got += (try await it1.next())?.count ?? 0 }
    // Corrupt chunk 1 on disk (complete, present in the reader's view).
    let path = cache.store.paths(for: cache.objectID(for: url)).data
    let h = try #require(FileHandle(forUpdatingAtPath: path))
    try h.seek(toOffset: UInt64(Self.cs + 5)); let old = try #require(try h.read(upToCount: 1)?.first)
    try h.seek(toOffset: UInt64(Self.cs + 5)); try h.write(contentsOf: Data([old ^ 1])); try h.close()
    let r2 = try await reader.read(url, range: .bounded(Int64(Self.cs)..<Int64(2 * Self.cs)))
    var d = Data()
    for try await p in r2 { d.append(p) }
    r2.close()
    // The dropped chunk came back through a new request, while the first one was still trickling: the reader
    // did not wait for (or spin on) the whole running flight.
    #expect(origin.totalBodyBytes(for: "spin") < size, "reader waited for the whole flight")
    #expect(origin.requests(for: "spin").count >= 2)
    #expect(d == Data(TestOrigin.bytes(name: "spin", size: size, range: Self.cs..<(2 * Self.cs))))
    r1.close()
    await reader.cancelAll()
    try await client.shutdown(); try await origin.shutdown()
  }

  // R5: a reader that joins a flight just after the last reader left gets CancellationError.
  @Test func readerJoiningDoomedFlightGetsCancellation() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    let cache = try mk(dir.file("cache"))
    let client = OriginClient()
    let reader = CachingReader(cache: cache, client: client)
    var failures: [String] = []
    for round in 0..<10 {
      let size = 4_000_000
      let name = "doom\(round)"
      let url = origin.url(.slow, name, size: size, query: "delay-ms=20")
      var pos: Int64 = 0
      do {
        let b = try await reader.read(url)
        var it = b.makeAsyncIterator()
        while pos < Int64(2 * Self.cs) + 1000 { pos += Int64((try await it.next())?.count ?? 0) }
        b.close()
      }
      try await Task.sleep(for: .milliseconds(3))
      do {
        let b2 = try await reader.read(url, range: .bounded(pos..<(pos + 100_000)))
        var n = 0
        for try await p in b2 { n += p.count }
        b2.close()
      } catch { failures.append("\(type(of: error)) \(error)") }
    }
    #expect(failures.isEmpty)
    try await client.shutdown(); try await origin.shutdown()
  }

  // R6: chunked origin, first request is a Range request: the length is never learned.
  @Test func chunkedOriginFromOffsetNeverEnds() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    let cache = try mk(dir.file("cache"))
    let client = OriginClient()
    let reader = CachingReader(cache: cache, client: client)
    let size = 300_000
    let url = origin.url(.chunked, "ch", size: size)
    let t = Task { () -> String in
      do {
        let b = try await reader.read(url, range: .from(1000))
        var n = 0
        for try await p in b { n += p.count }
        b.close()
        return "ok \(n)"
      } catch { return "error \(error)" }
    }
    // The read must end by itself; a read that never ends is cancelled after a minute (not after a fixed wait
    // that a loaded machine's reading task may outlast before it is done).
    let watchdog = Task {
      try await Task.sleep(for: .seconds(60))
      t.cancel()
      await reader.cancelAll()
    }
    let r = await t.value
    watchdog.cancel()
    await reader.cancelAll()
    #expect(r == "ok \(size - 1000)")
    try await client.shutdown(); try await origin.shutdown()
  }

  // R7: prefetch of a chunked (no length) object: Int64.max + chunkSize overflows in fillMissing.
  @Test func prefetchChunkedTraps() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    let cache = try mk(dir.file("cache"))
    let client = OriginClient()
    let reader = CachingReader(cache: cache, client: client)
    let url = origin.url(.chunked, "big", size: 3_000_000)
    var last: PrefetchProgress?
    for try await p in reader.prefetch(url) { last = p }
    #expect(last?.cachedBytes == 3_000_000)
    #expect(try await cache.status(for: url) == .complete(length: 3_000_000))
    try await client.shutdown(); try await origin.shutdown()
  }
}
