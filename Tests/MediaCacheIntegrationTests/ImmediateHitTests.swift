import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The proxy's path for a hit under load (Step 10): objects only read stay open a while after their last read
/// (`idleSessionLinger`), and a range they hold wholly is read and checked at once on the I/O executor
/// (`CachingReader.readCachedNow`), answered with the same head as a streamed hit.
@Suite(.serialized)
struct ImmediateHitTests {
  static let chunkSize = 65536

  func withReader(
    linger: Duration, _ body: (CachingReader, TestOrigin, MediaCache) async throws -> Void
  ) async throws {
    var configuration = CachingReader.Configuration()
    configuration.idleSessionLinger = linger
    try await MediaCacheTestSupport.withReader(chunkSize: Self.chunkSize, configuration: configuration, body)
  }

  func readAll(_ reader: CachingReader, _ url: String) async throws -> Data {
    let bytes = try await reader.read(url)
    defer { bytes.close() }
    var out = Data()
    for try await piece in bytes { out.append(piece) }
    return out
  }

  /// Reads the whole object and returns once what was fetched is committed and its session closed.
  func fetchAll(_ reader: CachingReader, _ url: String) async throws -> Data {
    let bytes = try await reader.read(url)
    var out = Data()
    for try await piece in bytes { out.append(piece) }
    await bytes.closeAndCommit()
    await reader.cache.closing.wait(for: reader.cache.objectID(for: url))
    return out
  }

  /// A proxy in this process over `reader`, listening on a free port; cancel the task to stop it.
  func startProxy(_ reader: CachingReader, _ configuration: ProxyServer.Configuration = .init()) async throws
    -> (port: Int, server: Task<Void, any Error>)
  {
    let (_, endpoint, server) = try await startInProcessProxy(reader, configuration)
    return (endpoint.port, server)
  }

  /// `readCachedNow` on an I/O executor thread, as the proxy calls it.
  func readNow(_ reader: CachingReader, _ url: String, _ range: RequestedRange) async throws -> CachedRange? {
    try await IOExecutor.shared.run { reader.readCachedNow(url, range: range, maxBytes: 1 << 20) }
  }

  @Test func aReadOnlyObjectStaysOpenAndServesRangesAtOnceUntilRemoved() async throws {
    try await withReader(linger: .seconds(60)) { reader, origin, cache in
      let size = 5 * Self.chunkSize + 1234
      let url = origin.url(.normal, "lingering", size: size)
      #expect(try await fetchAll(reader, url) == Data(TestOrigin.bytes(name: "lingering", size: size)))
      // A fetch ran on that session: it is closed (committed) as soon as its flight ends, not kept open, so
      // nothing is open to read from. (The read's end commits what it got; the flight may still be releasing
      // the session then: waited for, generously.)
      var open = true
      for _ in 0..<200 where open {
        open = try await readNow(reader, url, .bounded(0..<100)) != nil
        if open { try await Task.sleep(for: .milliseconds(50)) }
      }
      #expect(!open, "the session of a fetch stayed open")
      // A read from the cache only: its object stays open after the read.
      #expect(try await readAll(reader, url).count == size)
      let range: Range<Int64> = 70_000..<200_000
      let hit = try #require(try await readNow(reader, url, .bounded(range)))
      #expect(hit.range == range && hit.length == Int64(size))
      #expect(
        Array(hit.buffer.readableBytesView)
          == TestOrigin.bytes(name: "lingering", size: size, range: 70_000..<200_000))
      #expect(hit.etag != nil)
      let tail = try #require(try await readNow(reader, url, .suffix(10)))
      #expect(tail.range == Int64(size - 10)..<Int64(size))
      // Not on an I/O executor thread: it makes blocking calls, so it declines.
      #expect(reader.readCachedNow(url, range: .bounded(range), maxBytes: 1 << 20) == nil)
      // Longer than asked for, past the end, or another object: not now (a read handles those).
      #expect(
        try await IOExecutor.shared.run { reader.readCachedNow(url, range: .all, maxBytes: 1000) } == nil)
      #expect(try await readNow(reader, url, .bounded(Int64(size)..<Int64(size + 10))) == nil)
      #expect(try await readNow(reader, origin.url(.normal, "never-read", size: 1000), .all) == nil)
      // This process's removal closes the idle object first instead of finding it busy.
      #expect(try await cache.remove(url) > 0)
      #expect(try await readNow(reader, url, .bounded(range)) == nil)
      #expect(try await cache.status(for: url) == .none)
    }
  }

  /// Reads `url` from the cache until the read leaves it open on its own; whether it did within 200 tries. The
  /// fetch's session is closed (to commit) once its flight has ended, which on a loaded machine can be after a
  /// read borrowed it: so first wait until no session is open, then read until a read-only one stays open.
  func readUntilOpen(_ reader: CachingReader, _ url: String) async throws -> Bool {
    for _ in 0..<200 {
      if try await readNow(reader, url, .bounded(0..<10)) == nil { break }
      try await Task.sleep(for: .milliseconds(50))
    }
    for _ in 0..<200 {
      _ = try await readAll(reader, url)
      if try await readNow(reader, url, .bounded(0..<10)) != nil { return true }
      try await Task.sleep(for: .milliseconds(50))
    }
    return false
  }

  /// A range cached only as a span (bytes of a chunk that is not complete: what a player's small first range
  /// leaves) is answered at once too, the span read whole and checked; a range past the span is not.
  @Test func aRangeInASpanIsServedAtOnce() async throws {
    try await withReader(linger: .seconds(60)) { reader, origin, _ in
      let size = 4 * Self.chunkSize
      let url = origin.url(.normal, "span-hit", size: size)
      let first = try await reader.read(url, range: .bounded(0..<1000))
      var fetched = Data()
      for try await piece in first { fetched.append(piece) }
      await first.closeAndCommit()
      await reader.cache.closing.wait(for: reader.cache.objectID(for: url))
      #expect(fetched == Data(TestOrigin.bytes(name: "span-hit", size: size, range: 0..<1000)))
      // Read the span again from the cache until that read's session stays open (as `readUntilOpen`).
      var hit: CachedRange?
      for _ in 0..<200 where hit == nil {
        let again = try await reader.read(url, range: .bounded(0..<1000))
        for try await _ in again {}
        again.close()
        hit = try await readNow(reader, url, .bounded(100..<900))
        if hit == nil { try await Task.sleep(for: .milliseconds(50)) }
      }
      let served = try #require(hit, "the span was never served at once")
      #expect(served.range == 100..<900 && served.length == Int64(size))
      #expect(
        Array(served.buffer.readableBytesView)
          == TestOrigin.bytes(name: "span-hit", size: size, range: 100..<900))
      #expect(try await readNow(reader, url, .bounded(900..<1001)) == nil)
      #expect(origin.requests(for: "span-hit").count == 1)
    }
  }

  @Test func idleObjectsCloseWhenTheirLingerIsOver() async throws {
    // A linger long enough that the removal below comes well before it ends on a loaded machine (with 200 ms
    // a full parallel test run saw the object closed already; on CI the tests' tasks wait seconds for the
    // pool), short enough for a test.
    try await withReader(linger: .seconds(10)) { reader, origin, cache in
      let url = origin.url(.normal, "short-linger", size: 100_000)
      _ = try await fetchAll(reader, url)
      try #require(try await readUntilOpen(reader, url))
      // Another handle on the directory, as another process would see it: the idle object is open (busy).
      let other = try MediaCache(configuration: cache.configuration)
      await #expect(throws: StoreError.self) { try await other.remove(url) }
      // Closed once the linger is over: then the other handle can remove it (a generous bound: this asserts
      // that it closes, not how fast).
      let deadline = ContinuousClock.now + .seconds(60)
      var removed: Int64?
      while removed == nil, ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(50))
        removed = try? await other.remove(url)
      }
      #expect((removed ?? 0) > 0, "the idle object was still open a minute after its removal was refused")
      // Read again (fetched, then read from the cache), it stays open until closed on request.
      _ = try await fetchAll(reader, url)
      try #require(try await readUntilOpen(reader, url))
      #expect(try await readAll(reader, url).count == 100_000)
      await reader.closeIdleObjects()
      #expect(try await readNow(reader, url, .bounded(0..<10)) == nil)
      // CI once found the object still busy for the other handle right after this (cause not found: the
      // reader no longer served it at once, and only this test saw it): a closed object is removable within
      // seconds; a handle left open would keep it busy for good.
      let stop = ContinuousClock.now + .seconds(5)
      var removedAgain = try? await other.remove(url)
      while removedAgain == nil, ContinuousClock.now < stop {
        try await Task.sleep(for: .milliseconds(50))
        removedAgain = try? await other.remove(url)
      }
      #expect((removedAgain ?? 0) > 0, "the object closed on request was still busy 5 s later")
    }
  }

  @Test func theProxyAnswersAnImmediateHitWithTheSameHeadAsAStreamedOne() async throws {
    try await withReader(linger: .seconds(60)) { reader, origin, _ in
      let (port, server) = try await startProxy(reader)
      defer { server.cancel() }
      let size = 300_000
      let url = origin.url(.normal, "immediate", size: size)
      let path = ProxyServer.proxyPath(for: url)
      let fetched = try await blocking { try rawRequest(port: port, path) }
      #expect(fetched.status == 200 && fetched.body == TestOrigin.bytes(name: "immediate", size: size))
      await reader.cache.closing.wait(for: reader.cache.objectID(for: url))
      for (range, first, count) in [("bytes=1000-66535", 1000, 65536), ("bytes=-5000", size - 5000, 5000)] {
        // Nothing open: the request reads through a `CachedBytes` (streamed), and leaves the object open.
        // (The fetch's session closes once its flight has committed its last chunk: waited for, generously.)
        var open = true
        for _ in 0..<200 where open {
          await reader.closeIdleObjects()
          open = try await readNow(reader, url, .bounded(Int64(first)..<Int64(first + count))) != nil
          if open { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(!open)
        let before = ContinuousClock.now
        let streamed = try await blocking { try rawRequest(port: port, path, headers: [("Range", range)]) }
        // While a read has the object open, a request is answered at once.
        let held = try await reader.read(url)
        #expect(try await readNow(reader, url, .bounded(Int64(first)..<Int64(first + count))) != nil)
        let immediate = try await blocking { try rawRequest(port: port, path, headers: [("Range", range)]) }
        // Whole seconds between the two answers, plus one for the ticks of `Age` (CI once had them 2 s apart).
        let apart = Int((ContinuousClock.now - before).components.seconds) + 1
        held.close()
        let want = TestOrigin.bytes(name: "immediate", size: size, range: first..<(first + count))
        for response in [streamed, immediate] {
          #expect(response.status == 206)
          #expect(response.body == want)
          #expect(response.header("Content-Range") == "bytes \(first)-\(first + count - 1)/\(size)")
        }
        // `Age` (whole seconds) may tick between the two requests, once per second between them: it must be
        // there all the same, and never go back.
        let head = { (response: RawHTTPResponse) in
          response.headers.filter { $0.name.lowercased() != "date" }.map { field in
            field.name.lowercased() == "age" ? field.name : "\(field.name): \(field.value)"
          }
        }
        #expect(head(immediate) == head(streamed))
        let ages = [immediate, streamed].compactMap { $0.header("Age").flatMap { Int($0) } }
        #expect(
          ages.count == 2 && ages[0] >= ages[1] && ages[0] <= ages[1] + apart, "\(ages), \(apart) s apart")
      }
      // A whole object of at most 2 MiB: 200 with its length, no Content-Range, same head either way.
      let whole = try await blocking { try rawRequest(port: port, path) }
      let again = try await blocking { try rawRequest(port: port, path) }
      for response in [whole, again] {
        #expect(response.status == 200)
        #expect(response.body == TestOrigin.bytes(name: "immediate", size: size))
        #expect(response.header("Content-Range") == nil)
        #expect(response.header("Content-Length") == "\(size)")
      }
    }
  }

  @Test func hitsBeyondTheirBudgetWaitTheirTurnAndAllGetTheirBytes() async throws {
    try await withReader(linger: .seconds(60)) { reader, origin, _ in
      // A budget smaller than any response: each hit takes all of it, so they go one at a time. The loops answer
      // no hit themselves (those take no share): every hit is read on the I/O executor.
      var configuration = ProxyServer.Configuration()
      configuration.hitBytesInFlight = 64 << 10
      configuration.loopHitConnections = 0
      let (port, server) = try await startProxy(reader, configuration)
      defer { server.cancel() }
      let size = 1_000_000
      let url = origin.url(.normal, "budgeted", size: size)
      let path = ProxyServer.proxyPath(for: url)
      #expect(
        try await blocking { try rawRequest(port: port, path) }.body
          == TestOrigin.bytes(name: "budgeted", size: size))
      let held = try await reader.read(url)  // the object stays open: hits are answered at once
      defer { held.close() }
      let results = try await withThrowingTaskGroup(of: (Int, RawHTTPResponse).self) { group in
        for index in 0..<16 {
          group.addTask {
            let first = index * 50_000
            let response = try await blocking {
              try rawRequest(port: port, path, headers: [("Range", "bytes=\(first)-\(first + 299_999)")])
            }
            return (first, response)
          }
        }
        return try await group.reduce(into: []) { $0.append($1) }
      }
      #expect(results.count == 16)
      for (first, response) in results {
        #expect(response.status == 206)
        #expect(
          response.body == TestOrigin.bytes(name: "budgeted", size: size, range: first..<(first + 300_000)))
      }
    }
  }

  #if os(Linux)
    /// Drops the page cache's copy of the object's data file: written to disk first (the advice drops only
    /// clean pages), then read from disk next time.
    func evictPages(_ cache: MediaCache, _ url: String) throws {
      try dropPageCache(cache.store.paths(for: cache.objectID(for: url)).data)
    }

    /// `evictPages` until no page of `range` of the object's data file is in the page cache, up to 50 tries;
    /// whether they went. POSIX_FADV_DONTNEED is advice (pages still being written back, or read ahead by a read
    /// that was in flight, can stay), and the check is `mincore`, which reads nothing: a declined read without
    /// waiting (`readCachedNow`) starts the kernel's read-ahead, so the pages would be back by the next read.
    ///
    /// The pages must stay out for 20 ms, checked again then: on one host (2026-12-03) the first request right after
    /// an eviction that `mincore` had just confirmed was answered on a loop in 4 of 14 runs at 224740e (2 of 12
    /// at 0b6a544, and once in CI), and after a 20 ms pause and a second check it was declined in 12 of 12. The cause
    /// was not found: no page of the range was resident at either check.
    func evictUntilNotResident(_ cache: MediaCache, _ url: String, _ range: Range<Int64>) async throws -> Bool
    {
      let path = cache.store.paths(for: cache.objectID(for: url)).data
      for _ in 0..<50 {
        try evictPages(cache, url)
        if try residentPages(path, range) == 0 {
          try await Task.sleep(for: .milliseconds(20))
          if try residentPages(path, range) == 0 { return true }
        }
        try await Task.sleep(for: .milliseconds(100))
      }
      return false
    }

    @Test func aRangeInThePageCacheIsReadAndCheckedWithoutBlockingElseDeclined() async throws {
      try await withReader(linger: .seconds(60)) { reader, origin, cache in
        let size = 6 * Self.chunkSize
        let url = origin.url(.normal, "resident", size: size)
        _ = try await fetchAll(reader, url)
        let range: Range<Int64> = 70_000..<200_000
        // A read from the cache leaves the object open (a read that still found a chunk being committed fetched
        // it, and closed: read again, generously).
        var open = false
        for _ in 0..<200 where !open {
          #expect(try await readAll(reader, url).count == size)
          open = try await readNow(reader, url, .bounded(range)) != nil
          if !open { try await Task.sleep(for: .milliseconds(50)) }
        }
        try #require(open)
        let want = TestOrigin.bytes(name: "resident", size: size, range: 70_000..<200_000)
        // Read just now, its pages are in memory: read here, in a task (where nothing may block).
        let resident = reader.readCachedNow(
          url, range: .bounded(range), maxBytes: 1 << 20, waitingForDisk: false)
        #expect(resident.map { Array($0.buffer.readableBytesView) } == want)
        // Out of the page cache: declined (the read would wait for the disk), served on the I/O executor.
        // POSIX_FADV_DONTNEED is advice: pages still being written back, or read ahead by a read that was in
        // flight, can stay. Evicted again until the kernel lets them go (it did at the first try in most
        // runs; once in CI it did not).
        var declined = false
        for _ in 0..<50 where !declined {
          try evictPages(cache, url)
          declined =
            reader.readCachedNow(url, range: .bounded(range), maxBytes: 1 << 20, waitingForDisk: false) == nil
          if !declined { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(declined, "the range was still read without waiting after 50 evictions")
        #expect(
          try await readNow(reader, url, .bounded(range)).map { Array($0.buffer.readableBytesView) } == want)
        // That read brought the pages back.
        #expect(
          reader.readCachedNow(url, range: .bounded(range), maxBytes: 1 << 20, waitingForDisk: false)
            .map { Array($0.buffer.readableBytesView) } == want)
        // A byte flipped on disk (through the page cache): declined, and the chunk is left in place for the
        // read that drops it and fetches it again.
        let path = cache.store.paths(for: cache.objectID(for: url)).data
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: 100_000)
        let old = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: 100_000)
        try handle.write(contentsOf: Data([old ^ 0x01]))
        try handle.close()
        #expect(
          reader.readCachedNow(url, range: .bounded(range), maxBytes: 1 << 20, waitingForDisk: false) == nil)
        #expect(try await cache.status(for: url) == .complete(length: Int64(size)))
        #expect(try await readNow(reader, url, .bounded(range)) == nil)  // this one drops the chunk
        #expect(try await readAll(reader, url) == Data(TestOrigin.bytes(name: "resident", size: size)))
      }
    }

    @Test func aReadWithoutWaitingDeclinesWholeChunksLongerThanItsBound() async throws {
      var configuration = CachingReader.Configuration()
      configuration.idleSessionLinger = .seconds(60)
      // Chunks of 8 MiB + 4 KiB, not a multiple of the verification block: always read and checked whole.
      let chunk = (8 << 20) + 4096
      try await MediaCacheTestSupport.withReader(chunkSize: chunk, configuration: configuration) {
        reader, origin, _ in
        let size = 2 * chunk + 1000
        let url = origin.url(.normal, "large-chunks", size: size)
        _ = try await fetchAll(reader, url)
        let held = try await reader.read(url)  // the object stays open
        defer { held.close() }
        let first = chunk + 5000
        let range = Int64(first)..<Int64(first + 100)
        let want = TestOrigin.bytes(name: "large-chunks", size: size, range: first..<(first + 100))
        // 100 bytes, but in a chunk checked whole: 8 MiB to read and check, more than a loop may.
        #expect(CachingReader.residentReadMaxBytes < chunk)
        #expect(
          try await readNow(reader, url, .bounded(range)).map { Array($0.buffer.readableBytesView) } == want)
        #expect(
          reader.readCachedNow(url, range: .bounded(range), maxBytes: 1 << 20, waitingForDisk: false) == nil)
        // The short last chunk (1000 bytes) is read without waiting.
        let tail = Int64(2 * chunk)..<Int64(size)
        #expect(
          reader.readCachedNow(url, range: .bounded(tail), maxBytes: 1 << 20, waitingForDisk: false)
            .map { Array($0.buffer.readableBytesView) }
            == TestOrigin.bytes(name: "large-chunks", size: size, range: (2 * chunk)..<size))
      }
    }

    /// A loop sends a head it kept (`LoopHitHeads`) only where it would make the same one: each loop hit's head
    /// is the head a proxy whose loops answer no hit makes for the same request (but `Date` and `Age`), field
    /// for field and in the same order, whatever its range (the range's fields are added to the kept head per
    /// hit), its connection handling and its HTTP version, asked in an order that reuses and replaces kept
    /// heads; and `Age` goes on with the seconds.
    @Test func aLoopSendsAKeptHeadOnlyWhereItWouldMakeTheSame() async throws {
      try await withReader(linger: .seconds(60)) { reader, origin, _ in
        let (proxy, endpoint, server) = try await startInProcessProxy(reader)
        defer { server.cancel() }
        var configuration = ProxyServer.Configuration()
        configuration.loopHitConnections = 0
        let (_, offEndpoint, offServer) = try await startInProcessProxy(reader, configuration)
        defer { offServer.cancel() }
        let size = 300_000
        let url = origin.url(.normal, "kept-heads", size: size)
        let path = ProxyServer.proxyPath(for: url)
        #expect(try await blocking { try rawRequest(port: endpoint.port, path) }.status == 200)
        await reader.cache.closing.wait(for: reader.cache.objectID(for: url))
        let held = try await reader.read(url)  // while a read has the object open, hits are answered at once
        defer { held.close() }
        /// One request on a new connection to `port`, in HTTP/1.`minor` (1.0 asking to keep the connection).
        func ask(_ port: Int, _ range: String?, close: Bool = false, minor: Int = 1) async throws
          -> RawHTTPResponse
        {
          try await blocking {
            let connection = try RawHTTPConnection(port: port)
            defer { connection.close() }
            var text = "GET \(path) HTTP/1.\(minor)\r\nHost: 127.0.0.1\r\n"
            if let range { text += "Range: \(range)\r\n" }
            if close { text += "Connection: close\r\n" }
            if minor == 0 { text += "Connection: keep-alive\r\n" }
            try connection.send(text + "\r\n")
            return try connection.readResponse()
          }
        }
        let fields = { (response: RawHTTPResponse) in
          response.headers.filter { !["date", "age"].contains($0.name.lowercased()) }.map {
            "\($0.name): \($0.value)"
          }
        }
        await proxy.metrics.countsSettled()
        let onLoop = proxy.metrics.cacheHitsOnLoop
        let asked: [(range: String?, close: Bool, minor: Int)] = [
          ("bytes=0-65535", false, 1), ("bytes=0-65535", false, 1), ("bytes=1000-66535", false, 1),
          ("bytes=0-65535", true, 1), ("bytes=0-65535", false, 0), (nil, false, 1),
          ("bytes=0-65535", false, 1), ("bytes=250000-", false, 1), ("bytes=-1000", true, 1),
          ("bytes=70000-70000", false, 0), (nil, true, 1), (nil, false, 0), ("bytes=1000-66535", false, 1),
        ]
        for (range, close, minor) in asked {
          let hit = try await ask(endpoint.port, range, close: close, minor: minor)
          let made = try await ask(offEndpoint.port, range, close: close, minor: minor)
          let what = "\(range ?? "whole"), close \(close), HTTP/1.\(minor)"
          #expect(hit.status == made.status && hit.body == made.body, "\(what)")
          #expect(fields(hit) == fields(made), "\(what)")
          #expect(hit.header("Age") != nil, "\(what)")
        }
        await proxy.metrics.countsSettled()
        #expect(proxy.metrics.cacheHitsOnLoop == onLoop + Int64(asked.count))
        let first = try await ask(endpoint.port, "bytes=0-65535")
        try await Task.sleep(for: .milliseconds(2_100))
        let later = try await ask(endpoint.port, "bytes=0-65535")
        let ages = [first, later].compactMap { $0.header("Age").flatMap { Int($0) } }
        #expect(ages.count == 2 && ages[1] >= ages[0] + 2, "\(ages)")
      }
    }

    /// A loop decides a remembered target's hit from NIO's head (`ProxyResponder.hitNow(_:targets:)`) as it
    /// would from the whole request: field names in any case, conditionals and `If-Range` answered as a proxy
    /// whose loops answer no hit answers them (and not on a loop), `Range` sent twice left to the whole
    /// request's path. Every answer is the same as that proxy's.
    @Test func aLoopDecidesFromTheHeadAsFromTheWholeRequest() async throws {
      try await withReader(linger: .seconds(60)) { reader, origin, _ in
        // One loop, so that the target the first hit remembers is remembered for every connection after it.
        var oneLoop = ProxyServer.Configuration()
        oneLoop.eventLoops = 1
        let (proxy, endpoint, server) = try await startInProcessProxy(reader, oneLoop)
        defer { server.cancel() }
        var configuration = ProxyServer.Configuration()
        configuration.loopHitConnections = 0
        let (_, offEndpoint, offServer) = try await startInProcessProxy(reader, configuration)
        defer { offServer.cancel() }
        let url = origin.url(.normal, "head-decided", size: 300_000)
        let path = ProxyServer.proxyPath(for: url)
        let whole = try await blocking { try rawRequest(port: endpoint.port, path) }
        #expect(whole.status == 200)
        let etag = try #require(whole.header("ETag"))
        let lastModified = try #require(whole.header("Last-Modified"))
        await reader.cache.closing.wait(for: reader.cache.objectID(for: url))
        let held = try await reader.read(url)  // while a read has the object open, hits are answered at once
        defer { held.close() }
        func ask(_ port: Int, _ fields: [(String, String)]) async throws -> RawHTTPResponse {
          try await blocking { try rawRequest(port: port, path, headers: fields) }
        }
        // The first loop hit remembers the target; the rest are decided from the head.
        #expect(try await ask(endpoint.port, [("Range", "bytes=0-99")]).status == 206)
        let cases: [(fields: [(String, String)], onLoop: Bool)] = [
          ([("rAnGe", "bytes=100-65635")], true),
          ([("RANGE", "bytes=5-9")], true),
          ([], true),
          ([("IF-NONE-MATCH", etag)], false),
          ([("Range", "bytes=0-99"), ("if-none-match", "\"other\"")], false),
          ([("If-Modified-Since", lastModified)], false),
          ([("Range", "bytes=0-99"), ("IF-RANGE", etag)], false),
          ([("Range", "bytes=0-99"), ("If-Range", "\"other\"")], false),
          ([("If-None-Match", "")], false),
          ([("IF-MATCH", "\"other\"")], false),
          ([("Range", "bytes=0-99"), ("If-Match", etag)], false),
          ([("if-unmodified-since", "Sun, 31 Dec 2023 23:59:59 GMT")], false),
          ([("Range", "bytes=0-99"), ("Connection", "close")], true),
          // Spaces after a value: `HTTPField` trims them; left to the whole request's path, which answers it.
          ([("Range", "bytes=0-99" + String(repeating: " ", count: 4_100))], true),
          // Left to the whole request's path, which answers it on the loop too (its `Range`, the two joined).
          ([("Range", "bytes=0-99"), ("Range", "bytes=200-299")], true),
        ]
        let sameFields = { (response: RawHTTPResponse) in
          response.headers.filter { !["date", "age"].contains($0.name.lowercased()) }.map {
            "\($0.name): \($0.value)"
          }
        }
        for (fields, onLoop) in cases {
          await proxy.metrics.countsSettled()
          let before = proxy.metrics.cacheHitsOnLoop
          let hit = try await ask(endpoint.port, fields)
          let made = try await ask(offEndpoint.port, fields)
          let what = "\(fields.map { "\($0.0): \($0.1.prefix(40))" })"
          #expect(hit.status == made.status && hit.body == made.body, "\(what): \(hit.status) \(made.status)")
          #expect(sameFields(hit) == sameFields(made), "\(what)")
          await proxy.metrics.countsSettled()
          #expect(proxy.metrics.cacheHitsOnLoop == before + (onLoop ? 1 : 0), "\(what)")
        }
      }
    }

    /// A target the loop resolved (`ProxyResponder.resolvedTarget`, remembered in its `LoopTargetMemo` and
    /// handed to the task) names the same object for every request of it after that, whichever path answers it:
    /// on one loop, a miss in the path form and in the query form, then a HEAD, hits, a conditional and
    /// `If-Range` of each, answered as a proxy whose loops resolve nothing answers them (bytes and their
    /// fields); a target the proxy refuses is refused each time with the same answer; `/metrics` stays the
    /// proxy's own page next to a proxied URL named like it.
    @Test func aResolvedTargetNamesTheSameObjectForEveryRequestOfIt() async throws {
      try await withReader(linger: .seconds(60)) { reader, origin, _ in
        var oneLoop = ProxyServer.Configuration()
        oneLoop.eventLoops = 1
        let (_, endpoint, server) = try await startInProcessProxy(reader, oneLoop)
        defer { server.cancel() }
        var none = ProxyServer.Configuration()
        none.loopHitConnections = 0
        let (_, offEndpoint, offServer) = try await startInProcessProxy(reader, none)
        defer { offServer.cancel() }
        let size = 300_000
        func ask(
          _ port: Int, _ path: String, method: String = "GET", _ fields: [(String, String)] = []
        ) async throws -> RawHTTPResponse {
          try await blocking {
            let connection = try RawHTTPConnection(port: port)
            defer { connection.close() }
            try connection.sendRequest(method, path, headers: fields)
            return try connection.readResponse(method: method)
          }
        }
        let kept = { (response: RawHTTPResponse) in
          response.headers.filter { !["date", "age", "cache-status"].contains($0.name.lowercased()) }.map {
            "\($0.name): \($0.value)"
          }
        }
        for form in ["path", "query"] {
          let name = "resolved-\(form)"
          let url = origin.url(.normal, name, size: size)
          let path =
            form == "path" ? ProxyServer.proxyPath(for: url) : ProxyServer.queryFormPath(for: url)
          // The miss resolves the target on the loop; its task answers with it.
          let miss = try await ask(endpoint.port, path, [("Range", "bytes=1000-70999")])
          #expect(miss.status == 206, "\(form)")
          #expect(miss.body == TestOrigin.bytes(name: name, size: size, range: 1000..<71_000), "\(form)")
          #expect(miss.header("Content-Range") == "bytes 1000-70999/\(size)", "\(form)")
          let whole = try await ask(endpoint.port, path)
          #expect(whole.status == 200, "\(form)")
          #expect(whole.body == TestOrigin.bytes(name: name, size: size, range: 0..<size), "\(form)")
          let etag = try #require(whole.header("ETag"))
          let cases: [(method: String, fields: [(String, String)])] = [
            ("HEAD", []), ("HEAD", [("Range", "bytes=0-99")]), ("GET", [("Range", "bytes=5-9")]),
            ("GET", [("Range", "bytes=-1000")]), ("GET", [("If-None-Match", etag)]),
            ("GET", [("Range", "bytes=0-99"), ("If-Range", etag)]),
            ("GET", [("Range", "bytes=0-99"), ("If-Range", "\"other\"")]),
          ]
          for (method, fields) in cases {
            let answer = try await ask(endpoint.port, path, method: method, fields)
            let made = try await ask(offEndpoint.port, path, method: method, fields)
            let what = "\(form) \(method) \(fields.map { "\($0.0): \($0.1)" })"
            #expect(answer.status == made.status && answer.body == made.body, "\(what)")
            #expect(kept(answer) == kept(made), "\(what)")
          }
        }
        // Refused targets (not remembered): the same answer each time, as the proxy that resolves nothing gives.
        for path in ["/x?url=ftp%3A%2F%2F127.0.0.1%2Fa", "/x?url=not%20a%20url", "/x"] {
          let made = try await ask(offEndpoint.port, path)
          for _ in 0..<2 {
            let answer = try await ask(endpoint.port, path)
            #expect(
              answer.status >= 400 && answer.status == made.status && answer.body == made.body, "\(path)"
            )
          }
        }
        // A proxied URL named like the metrics page, then the page itself: each stays what it is.
        let metricsNamed = origin.url(.normal, "metrics", size: 1000)
        let named = try await ask(endpoint.port, ProxyServer.queryFormPath(for: metricsNamed))
        #expect(named.body == TestOrigin.bytes(name: "metrics", size: 1000, range: 0..<1000))
        let page = try await ask(endpoint.port, "/metrics")
        #expect(page.status == 200)
        #expect(String(decoding: page.body, as: UTF8.self).contains("mediacache_proxy_requests_total"))
      }
    }

    @Test func theProxyAnswersHitsInThePageCacheOnItsEventLoop() async throws {
      try await withReader(linger: .seconds(60)) { reader, origin, cache in
        let (proxy, endpoint, server) = try await startInProcessProxy(reader)
        defer { server.cancel() }
        let port = endpoint.port
        let size = 400_000
        let url = origin.url(.normal, "on-loop", size: size)
        let path = ProxyServer.proxyPath(for: url)
        #expect(try await blocking { try rawRequest(port: port, path) }.status == 200)
        await reader.cache.closing.wait(for: reader.cache.objectID(for: url))
        let held = try await reader.read(url)  // while a read has the object open, hits are answered at once
        defer { held.close() }
        await proxy.metrics.countsSettled()
        let loopHits = proxy.metrics.cacheHitsOnLoop
        let (hits, fromCache, answered) = (
          proxy.metrics.cacheHits, proxy.metrics.bytesFromCache, proxy.metrics.requests(statusClass: 2)
        )
        func get(_ first: Int, _ count: Int) async throws {
          let response = try await blocking {
            try rawRequest(port: port, path, headers: [("Range", "bytes=\(first)-\(first + count - 1)")])
          }
          #expect(response.status == 206)
          #expect(
            response.body == TestOrigin.bytes(name: "on-loop", size: size, range: first..<(first + count)))
          #expect(response.header("Content-Range") == "bytes \(first)-\(first + count - 1)/\(size)")
        }
        try await get(1000, 100_000)
        try await get(size - 5000, 5000)
        await proxy.metrics.countsSettled()
        #expect(proxy.metrics.cacheHitsOnLoop == loopHits + 2)
        // A loop hit is counted once its response is handed to the socket (`ProxyResponder.countLoopHit`), every
        // count of it: after `countsSettled`, as `/metrics` sees it.
        #expect(proxy.metrics.cacheHits == hits + 2)
        #expect(proxy.metrics.bytesFromCache == fromCache + 105_000)
        #expect(proxy.metrics.requests(statusClass: 2) == answered + 2)
        // Out of the page cache: the same answer, read on the I/O executor instead.
        let evicted = try await evictUntilNotResident(cache, url, 1000..<101_000)
        try #require(evicted, "pages of the range were still in the page cache after 50 evictions")
        try await get(1000, 100_000)
        await proxy.metrics.countsSettled()
        #expect(proxy.metrics.cacheHitsOnLoop == loopHits + 2)
        try await get(1000, 100_000)
        await proxy.metrics.countsSettled()
        #expect(proxy.metrics.cacheHitsOnLoop == loopHits + 3)
        // A proxy whose loops answer no hit (`loopHitConnections` 0, as a loop past its connections): the same
        // answers, none on a loop.
        var configuration = ProxyServer.Configuration()
        configuration.loopHitConnections = 0
        let (offLoop, offEndpoint, offServer) = try await startInProcessProxy(reader, configuration)
        defer { offServer.cancel() }
        let offPort = offEndpoint.port
        let offResponse = try await blocking {
          try rawRequest(port: offPort, path, headers: [("Range", "bytes=1000-100999")])
        }
        #expect(offResponse.status == 206)
        #expect(offResponse.body == TestOrigin.bytes(name: "on-loop", size: size, range: 1000..<101_000))
        await offLoop.metrics.countsSettled()
        #expect(offLoop.metrics.cacheHits == 1 && offLoop.metrics.cacheHitsOnLoop == 0)
        let metrics = try await blocking { try rawRequest(port: port, "/metrics") }
        #expect(
          String(decoding: metrics.body, as: UTF8.self).contains(
            "mediacache_proxy_cache_hits_on_loop_total \(loopHits + 3)\n"))
        // Each hit written from the loop counts as a response until NIO is done with its buffer: none is left
        // counted (the count goes down after the last byte reached the socket, so it may trail the client).
        let isZero = { (line: String) in line.hasSuffix(" 0") || line.hasSuffix(" 0.0") }
        var active = ""
        for _ in 0..<100 {
          let text = String(
            decoding: try await blocking { try rawRequest(port: port, "/metrics") }.body, as: UTF8.self)
          let gauge = text.split(separator: "\n").first { $0.hasPrefix("mediacache_proxy_active_responses ") }
          active = gauge.map(String.init) ?? ""
          if isZero(active) { break }
          try await Task.sleep(for: .milliseconds(20))
        }
        #expect(isZero(active), "\(active)")
      }
    }
  #endif

  /// A proxied URL whose query form names it like one of the proxy's own pages (`/dashboard.json?url=…`, for
  /// an origin URL ending in `dashboard.json` that the path form cannot carry) is the origin's object on every
  /// path: answered on a loop or in a task, never the dashboard.
  @Test func aProxiedURLNamedLikeAnOwnPageIsTheObjectOnEveryPath() async throws {
    try await withReader(linger: .seconds(60)) { reader, origin, _ in
      let size = 100_000
      let url = origin.url(.normal, "dashboard.json", size: size)
      let path = ProxyServer.queryFormPath(for: url)
      #expect(path.hasPrefix("/dashboard.json?url="))
      let expected = TestOrigin.bytes(name: "dashboard.json", size: size)
      let (port, server) = try await startProxy(reader)
      defer { server.cancel() }
      // Fetched, read again from the cache (its object then stays open), then a range: a hit on the loop.
      for range in [nil, nil, "bytes=100-999"] {
        let response = try await blocking {
          try rawRequest(port: port, path, headers: range.map { [("Range", $0)] } ?? [])
        }
        let want = range == nil ? expected : Array(expected[100..<1000])
        #expect(response.status == (range == nil ? 200 : 206))
        #expect(response.body == want, "\(range ?? "whole"): not the object's bytes")
      }
    }
  }
}
