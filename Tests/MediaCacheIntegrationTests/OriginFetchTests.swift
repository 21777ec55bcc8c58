import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// Reading through the cache from a real HTTP origin on 127.0.0.1 (`TestOrigin`), in every origin mode.
@Suite(.serialized)
struct OriginFetchTests {
  static let chunkSize = 65536

  /// A cache in a fresh directory, a reader over it, and an origin; all torn down afterwards.
  func withReader(
    retries: Int = 3, readAhead: Int64 = 4 << 20,
    _ body: (CachingReader, TestOrigin, MediaCache) async throws -> Void
  ) async throws {
    try await MediaCacheTestSupport.withReader(
      chunkSize: Self.chunkSize,
      client: OriginClient(configuration: .init(connectTimeout: .seconds(5), idleTimeout: .seconds(10))),
      configuration: .init(
        abandonedRequestReadAhead: readAhead, maxRetries: retries, retryBaseDelay: .milliseconds(10)),
      body)
  }

  func readAll(_ reader: CachingReader, _ url: String, _ range: RequestedRange = .all) async throws -> Data {
    let bytes = try await reader.read(url, range: range)
    defer { bytes.close() }
    var out = Data()
    for try await piece in bytes {
      #expect(piece.count <= Self.chunkSize)
      out.append(piece)
    }
    return out
  }

  /// A miss's bytes go to its reader as the origin response's buffers, even when the flight wrote them to the
  /// cache before the reader first looked (the head is waited for first, and a small range's body comes with
  /// it) or ended before it asked: never read back from the file (a hop to the I/O executor, a read and a
  /// CRC of the span, for bytes in memory). Before, a small miss's first piece was read back from the cache.
  @Test func aMissIsHandedOverFromMemoryNotReadBack() async throws {
    try await withReader { reader, origin, cache in
      let size = 4 * Self.chunkSize
      for (index, range) in [0..<1000, 70_000..<90_000, 0..<(Self.chunkSize + 10)].enumerated() {
        let url = origin.url(.normal, "from-memory-\(index)", size: size)
        let bytes = try await reader.read(
          url, range: .bounded(Int64(range.lowerBound)..<Int64(range.upperBound)))
        var iterator = bytes.makeAsyncIterator()
        var out = Data()
        var kinds: [String] = []
        while let piece = try await iterator.nextPiece() {
          if case .disk = piece {
            kinds.append("disk \(piece.count)")
          } else {
            kinds.append("origin \(piece.count)")
          }
          out.append(piece.data)
        }
        bytes.close()
        #expect(out == expected("from-memory-\(index)", size, range), "range \(range)")
        // A range past a chunk's end reads the completed chunk from the cache (memory holds the chunk being
        // filled only); the bytes of the chunk being filled come from memory.
        let fromDisk = kinds.filter { $0.hasPrefix("disk") }
        if range.upperBound <= Self.chunkSize || range.lowerBound >= Self.chunkSize {
          #expect(fromDisk.isEmpty, "range \(range): pieces \(kinds)")
        } else {
          #expect(kinds.last?.hasPrefix("origin") == true, "range \(range): pieces \(kinds)")
        }
        try expectNoWrongByte(cache, url, "from-memory-\(index)", size)
      }
    }
  }

  /// A reader that takes a range smaller than a chunk and closes at once (a player reading an index, the
  /// proxy answering `Range: bytes=0-65535`) leaves what it read cached, as a span of the chunk (manifest 1.1),
  /// committed when the object closes: the same range again is served without the origin. Before, closing the
  /// read closed the object's data manager under the running flight, so nothing was committed and every such
  /// request went to the origin.
  @Test func aSmallRangeReadAndClosedStillCachesItsBytes() async throws {
    try await withReader { reader, origin, cache in
      let size = 4 * Self.chunkSize + 100
      let url = origin.url(.slow, "small-range", size: size, query: "delay-ms=5")
      #expect(try await readAll(reader, url, .bounded(0..<1000)) == expected("small-range", size, 0..<1000))
      let id = cache.objectID(for: url)
      let deadline = Date().addingTimeInterval(20)
      while (try cache.store.readManifest(id)?.cachedRun(at: 0) ?? 0) < 1000 && Date() < deadline {
        try await Task.sleep(for: .milliseconds(20))
      }
      #expect(
        (try cache.store.readManifest(id)?.cachedRun(at: 0) ?? 0) >= 1000, "bytes 0..<1000 were not cached")
      let requests = origin.requests(for: "small-range").count
      #expect(try await readAll(reader, url, .bounded(0..<1000)) == expected("small-range", size, 0..<1000))
      #expect(origin.requests(for: "small-range").count == requests, "the second read went to the origin")
      try expectNoWrongByte(cache, url, "small-range", size)
    }
  }

  func expected(_ name: String, _ size: Int, version: Int = 0, _ range: Range<Int>? = nil) -> Data {
    Data(TestOrigin.bytes(name: name, size: size, version: version, range: range ?? 0..<size))
  }

  /// Every chunk the cache lists for `url` holds exactly the origin's bytes of `version`.
  func expectNoWrongByte(_ cache: MediaCache, _ url: String, _ name: String, _ size: Int, version: Int = 0)
    throws
  {
    guard let manifest = try cache.store.readManifest(cache.objectID(for: url)) else { return }
    let manager = try cache.assetDataManager(for: url, writable: false)
    defer { try? manager.close() }
    let all = expected(name, size, version: version)
    for run in manifest.presentByteRanges.ranges {
      #expect(try manager.read(run) == all[Int(run.lowerBound)..<Int(run.upperBound)], "bytes \(run)")
    }
  }

  @Test func normalOriginFillsTheCacheAndSecondReadsNeedNoRequest() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 1_000_000
      let url = origin.url(.normal, "movie", size: size)
      #expect(try await readAll(reader, url) == expected("movie", size))
      #expect(try await cache.status(for: url) == .complete(length: Int64(size)))
      let before = origin.requests(for: "movie").count
      #expect(
        try await readAll(reader, url, .bounded(100_000..<300_000))
          == expected("movie", size, 100_000..<300_000))
      #expect(try await readAll(reader, url, .suffix(1000)) == expected("movie", size, (size - 1000)..<size))
      #expect(origin.requests(for: "movie").count == before)
      let manifest = try #require(try cache.store.readManifest(cache.objectID(for: url)))
      #expect(manifest.etag == TestOrigin.etag(name: "movie"))
      #expect(manifest.contentType == "video/mp4")
    }
  }

  @Test func halfCachedRangeFetchesOnlyTheMissingChunks() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 16 * Self.chunkSize
      let url = origin.url(.normal, "half", size: size)
      _ = try await readAll(reader, url, .bounded(0..<Int64(8 * Self.chunkSize)))
      origin.resetRecords()
      #expect(try await readAll(reader, url) == expected("half", size))
      let requests = origin.requests(for: "half")
      #expect(requests.count == 1, "\(requests)")
      #expect(requests.first?.range == "bytes=\(8 * Self.chunkSize)-\(size - 1)")
      #expect(origin.totalBodyBytes(for: "half") == 8 * Self.chunkSize)
      #expect(try await cache.status(for: url) == .complete(length: Int64(size)))
    }
  }

  @Test func openEndedAndSuffixRangesLearnTheLength() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 300_000
      let url = origin.url(.normal, "open", size: size)
      #expect(try await readAll(reader, url, .from(250_000)) == expected("open", size, 250_000..<size))
      #expect(try await cache.manifest(for: url)?.contentLength == Int64(size))
      let other = origin.url(.normal, "suffix", size: size)
      #expect(
        try await readAll(reader, other, .suffix(5000)) == expected("suffix", size, (size - 5000)..<size))
      await #expect(throws: OriginError.self) { _ = try await readAll(reader, url, .from(Int64(size) + 10)) }
    }
  }

  @Test func originWithoutRangeSupport() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 500_000
      let url = origin.url(.norange, "plain", size: size)
      #expect(
        try await readAll(reader, url, .bounded(300_000..<400_000))
          == expected("plain", size, 300_000..<400_000))
      try expectNoWrongByte(cache, url, "plain", size)
      #expect(try await readAll(reader, url) == expected("plain", size))
    }
  }

  @Test func chunkedOriginWithoutLength() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 400_123
      let url = origin.url(.chunked, "chunky", size: size)
      #expect(try await readAll(reader, url) == expected("chunky", size))
      #expect(try await cache.status(for: url) == .complete(length: Int64(size)))
    }
  }

  @Test(arguments: [TestOrigin.Mode.normal, .lastmod])
  func originChangeResetsInsteadOfMixing(mode: TestOrigin.Mode) async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 10 * Self.chunkSize
      let name = "changing-\(mode.rawValue)"
      let url = origin.url(mode, name, size: size)
      #expect(
        try await readAll(reader, url, .bounded(0..<Int64(4 * Self.chunkSize)))
          == expected(name, size, 0..<(4 * Self.chunkSize)))
      origin.setVersion(name: name, to: 1)
      // The rest is fetched with If-Range; the origin's new version resets the object.
      let rest = try await readAll(reader, url, .bounded(Int64(4 * Self.chunkSize)..<Int64(size)))
      #expect(rest == expected(name, size, version: 1, (4 * Self.chunkSize)..<size))
      #expect(try await readAll(reader, url) == expected(name, size, version: 1))
      try expectNoWrongByte(cache, url, name, size, version: 1)
      let validators = origin.requests(for: name).compactMap(\.ifRange)
      #expect(!validators.isEmpty)
    }
  }

  @Test func truncatedBodyIsATypedErrorAndNothingWrongIsCached() async throws {
    try await withReader(retries: 1) { reader, origin, cache async throws in
      let size = 400_000
      let url = origin.url(.truncated, "cut", size: size)
      await #expect {
        _ = try await readAll(reader, url)
      } throws: { error in
        guard (error as? OriginError)?.code == .truncatedBody else { return false }
        return true
      }
      try expectNoWrongByte(cache, url, "cut", size)
    }
  }

  @Test func wrongContentRangeIsRefused() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 400_000
      let url = origin.url(.wrongrange, "shifted", size: size)
      await #expect {
        _ = try await readAll(reader, url, .bounded(100_000..<200_000))
      } throws: { error in
        guard (error as? OriginError)?.code == .contentRangeMismatch else { return false }
        return true
      }
      #expect(try await cache.status(for: url) == .none)
    }
  }

  @Test func serverErrorsAreRetried() async throws {
    try await withReader { reader, origin, _ async throws in
      let size = 200_000
      let url = origin.url(.flaky, "flaky", size: size)
      #expect(try await readAll(reader, url) == expected("flaky", size))
      #expect(origin.requests(for: "flaky").map(\.status) == [500, 500, 200])
    }
  }

  @Test func persistentServerErrorsEndWithATypedError() async throws {
    try await withReader(retries: 1) { reader, origin, _ async throws in
      let url = origin.url(.flaky, "down", size: 1000, query: "failures=10")
      await #expect(throws: OriginError.httpStatus(url: url, status: 500, attempts: 2)) {
        _ = try await readAll(reader, url)
      }
    }
  }

  @Test func redirectsAreFollowedAndTheKeyIsTheAskedURL() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 100_000
      let url = origin.url(.redirect, "moved", size: size)
      #expect(try await readAll(reader, url) == expected("moved", size))
      #expect(try await cache.status(for: url) == .complete(length: Int64(size)))
      #expect(try await cache.status(for: origin.url(.normal, "moved", size: size)) == .none)
      let loop = origin.url(.redirect, "far", size: size, query: "hops=12")
      await #expect(throws: OriginError.tooManyRedirects(url: loop)) { _ = try await readAll(reader, loop) }
    }
  }

  @Test func compressedBodiesAndOtherSchemesAreRefused() async throws {
    try await withReader { reader, origin, cache async throws in
      let url = origin.url(.gzip, "zipped", size: 50_000)
      await #expect {
        _ = try await readAll(reader, url)
      } throws: { error in
        guard (error as? OriginError)?.code == .unsupportedContentEncoding else { return false }
        return true
      }
      #expect(try await cache.status(for: url) == .none)
      await #expect(throws: OriginError.unsupportedScheme(url: "ftp://example.com/a.mp4")) {
        _ = try await reader.read("ftp://example.com/a.mp4")
      }
    }
  }

  @Test func firstBytesArriveLongBeforeTheObjectIsComplete() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 2_000_000
      // 16 KiB per 80 ms: 10 s for the whole object, so "long before" holds on a loaded machine too (the test's
      // task may get the pool seconds late when the whole suite runs on 2 cores).
      let url = origin.url(.slow, "trickle", size: size, query: "delay-ms=80")
      let bytes = try await reader.read(url)
      var iterator = bytes.makeAsyncIterator()
      let first = try #require(try await iterator.next())
      #expect(first == expected("trickle", size, 0..<first.count))
      let request = try #require(origin.requests(for: "trickle").first)
      #expect(!request.isComplete && request.bodyBytesSent < size / 2, "\(request)")
      var all = first
      while let piece = try await iterator.next() { all.append(piece) }
      bytes.close()
      #expect(all == expected("trickle", size))
      #expect(try await cache.status(for: url) == .complete(length: Int64(size)))
    }
  }

  @Test func tenConcurrentReadersFetchEachChunkOnce() async throws {
    try await withReader { reader, origin, _ async throws in
      let size = 3_000_000
      let url = origin.url(.slow, "popular", size: size, query: "delay-ms=2")
      let want = expected("popular", size)
      try await withThrowingTaskGroup(of: Data.self) { group in
        for _ in 0..<10 { group.addTask { try await readAll(reader, url) } }
        for try await result in group { #expect(result == want) }
      }
      #expect(origin.totalBodyBytes(for: "popular") == size, "\(origin.requests(for: "popular"))")
    }
  }

  /// Ten first readers of a new object from a fast origin, 40 objects in a row: each chunk is fetched once.
  /// Before, a reader that waited for the flight selection while the first flight finished the whole object
  /// started a new flight for chunk 0 (the origin saw a second request, `Range: bytes=0-65535`, in about one
  /// run of two under load); the selection now looks at the manifest again before starting a flight.
  @Test func firstReadersOfFastObjectsFetchEachChunkOnce() async throws {
    try await withReader { reader, origin, _ async throws in
      var fetchedTwice: [String] = []
      for round in 0..<40 {
        let name = "fast\(round)"
        let size = 700_000
        let url = origin.url(.normal, name, size: size)
        try await withThrowingTaskGroup(of: Data.self) { group in
          for _ in 0..<10 { group.addTask { try await readAll(reader, url) } }
          for try await result in group { #expect(result == expected(name, size)) }
        }
        if origin.totalBodyBytes(for: name) != size { fetchedTwice.append("\(origin.requests(for: name))") }
      }
      #expect(fetchedTwice.isEmpty, "\(fetchedTwice)")
    }
  }

  /// A cold read whose reader falls behind the origin request (the flight writes every chunk to the cache
  /// before the reader takes any) still counts every byte as fetched from the origin: the proxy's hit and
  /// miss counters come from these figures. Before, the chunks the reader found already written counted as
  /// cache bytes, and a cold request under load could be counted as a hit.
  @Test func aReaderBehindItsFetchStillCountsTheBytesAsFromTheOrigin() async throws {
    try await withReader { reader, origin, _ async throws in
      let size = 500_000
      let url = origin.url(.normal, "behind", size: size)
      let bytes = try await reader.read(url)
      defer { bytes.close() }
      for _ in 0..<200 where origin.requests(for: "behind").first?.isComplete != true {
        try await Task.sleep(for: .milliseconds(10))
      }
      try await Task.sleep(for: .milliseconds(100))  // the last chunk reaches the cache
      var data = Data()
      for try await piece in bytes { data.append(piece) }
      #expect(data == expected("behind", size))
      #expect(bytes.bytesFromOrigin == Int64(size))
      #expect(bytes.bytesFromCache == 0)
    }
  }

  /// Without read-ahead for abandoned requests (`abandonedRequestReadAhead: 0`), a reader that leaves stops
  /// the request at the end of the chunk it is in.
  @Test func cancelledReaderCancelsTheRequestAndALaterReadResumes() async throws {
    try await withReader(readAhead: 0) { reader, origin, cache async throws in
      let size = 4_000_000
      let url = origin.url(.slow, "abandoned", size: size, query: "delay-ms=10")
      let task = Task {
        let bytes = try await reader.read(url)
        var received = 0
        for try await piece in bytes {
          received += piece.count
          if received >= 4 * Self.chunkSize { break }
        }
        bytes.close()
        return received
      }
      _ = try await task.value
      // The origin sees the client go away.
      var disconnected = false
      for _ in 0..<500 where !disconnected {
        disconnected = origin.requests(for: "abandoned").contains { $0.clientDisconnected }
        try await Task.sleep(for: .milliseconds(10))
      }
      #expect(disconnected, "\(origin.requests(for: "abandoned"))")
      #expect(origin.totalBodyBytes(for: "abandoned") < size)
      let cached = try await cache.manifest(for: url)?.presentByteRanges.count ?? 0
      #expect(cached >= Int64(4 * Self.chunkSize))
      origin.resetRecords()
      #expect(try await readAll(reader, url) == expected("abandoned", size))
      let resumed = try #require(origin.requests(for: "abandoned").first?.range)
      #expect(resumed.hasPrefix("bytes=\(cached)-"), "resumed with \(resumed), cached \(cached)")
    }
  }

  @Test func aCorruptCachedChunkIsFetchedAgainWithoutTheReaderNoticing() async throws {
    try await withReader { reader, origin, cache async throws in
      let size = 8 * Self.chunkSize
      let url = origin.url(.normal, "rotting", size: size)
      _ = try await readAll(reader, url)
      // Flip a byte of chunk 5 on disk.
      let path = cache.store.paths(for: cache.objectID(for: url)).data
      let handle = try #require(FileHandle(forUpdatingAtPath: path))
      try handle.seek(toOffset: UInt64(5 * Self.chunkSize + 77))
      let old = try #require(try handle.read(upToCount: 1)?.first)
      try handle.seek(toOffset: UInt64(5 * Self.chunkSize + 77))
      try handle.write(contentsOf: Data([old ^ 0x01]))
      try handle.close()
      origin.resetRecords()
      #expect(try await readAll(reader, url) == expected("rotting", size))
      let requests = origin.requests(for: "rotting")
      #expect(
        requests.map(\.range) == ["bytes=\(5 * Self.chunkSize)-\(6 * Self.chunkSize - 1)"], "\(requests)")
      try expectNoWrongByte(cache, url, "rotting", size)
    }
  }

  @Test func aLateReaderJoinsTheRunningRequest() async throws {
    try await withReader { reader, origin, _ async throws in
      let size = 2_000_000
      let url = origin.url(.slow, "joined", size: size, query: "delay-ms=4")
      let first = try await reader.read(url)
      var iterator = first.makeAsyncIterator()
      var received = 0
      while received < 300_000, let piece = try await iterator.next() { received += piece.count }
      // Join from the start while the first request is mid-way: earlier bytes come from the cache and memory.
      let second = try await readAll(reader, url)
      while let piece = try await iterator.next() { received += piece.count }
      first.close()
      #expect(second == expected("joined", size))
      #expect(received == size)
      #expect(origin.requests(for: "joined").count == 1, "\(origin.requests(for: "joined"))")
      #expect(origin.totalBodyBytes(for: "joined") == size)
    }
  }

  /// Players are not limited by a slot count: 12 foreground reads of different objects (from two readers)
  /// all have their origin request running at once. Prefetching 12 objects runs at most 6 requests at once
  /// for the host (the default background limit), across readers of the process.
  @Test func foregroundReadsRunAtOnceAndBackgroundAtMostSixPerHost() async throws {
    try await withReader { reader, origin, cache async throws in
      let other = CachingReader(cache: cache, client: reader.client)
      let size = 400_000
      // Requests of this phase only, and only while they still have body bytes to send: the origin records a
      // response's end a moment (its 40 ms piece delay, then the end's write) after the reader has its last
      // byte and the request's slot has gone to the next one (CI saw 7 "background" requests that way).
      func peak(_ prefix: String, _ work: @escaping @Sendable (Int) async throws -> Void) async throws -> Int
      {
        let sampler = Task {
          var peak = 0
          while !Task.isCancelled {
            peak = max(
              peak,
              origin.allRequests().filter {
                $0.name.hasPrefix(prefix) && !$0.isComplete && $0.bodyBytesSent < size
              }.count)
            try? await Task.sleep(for: .milliseconds(2))
          }
          return peak
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
          for index in 0..<12 { group.addTask { try await work(index) } }
          try await group.waitForAll()
        }
        sampler.cancel()
        return await sampler.value
      }
      let foreground = try await peak("many-") { index in
        let url = origin.url(.slow, "many-\(index)", size: size, query: "delay-ms=40")
        _ = try await readAll(index.isMultiple(of: 2) ? reader : other, url)
      }
      #expect(foreground == 12, "peak \(foreground) concurrent foreground origin requests")
      let background = try await peak("prefetched-") { index in
        let url = origin.url(.slow, "prefetched-\(index)", size: size, query: "delay-ms=40")
        for try await _ in (index.isMultiple(of: 2) ? reader : other).prefetch(url) {}
      }
      #expect(background <= 6 && background >= 2, "peak \(background) concurrent background origin requests")
    }
  }

  /// A prefetch's progress does not queue up behind a consumer slower than its samples: one that looks after a
  /// second gets the state of that moment, not the first sample of a backlog. (PreloaderTests measured a
  /// pause by when its consumer got each sample; behind a busy machine's backlog, states from before the
  /// player started were stamped as if they came during its wait: CI once saw 1.7 MB "cached while the player
  /// waited".)
  @Test func aSlowProgressConsumerGetsTheNewestSample() async throws {
    try await withReader { reader, origin, _ in
      // 16 KiB every 20 ms: about 800 KiB per second, 4 MiB in about 5 s.
      let url = origin.url(.slow, "progress-newest", size: 4 << 20, query: "delay-ms=20")
      var updates = reader.prefetch(url).makeAsyncIterator()
      try await Task.sleep(for: .milliseconds(1500))
      let first = try #require(try await updates.next())
      // A backlog would start with the first sample, taken as the fetch began (about nothing cached).
      #expect(first.cachedBytes >= 256 << 10, "the first sample read after 1.5 s: \(first.cachedBytes) bytes")
      var last = first
      while let update = try await updates.next() { last = update }
      #expect(last.cachedBytes == 4 << 20 && last.isComplete)
    }
  }
}
