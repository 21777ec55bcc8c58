import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

@testable import MediaCacheHTTP

/// Each byte from the origin once: cold plays with the access patterns of real players (an open-ended request
/// dropped to jump to the moov at the end, several overlapping ranged readers at once) ask the origin for each
/// chunk once, and an abandoned request's waste is bounded.
@Suite(.serialized)
struct OriginBytesOnceTests {
  /// The whole chunks (of `chunkSize`) each 206 answer for `name` sent: a chunk in two of these lists was
  /// fetched twice.
  static func chunksSent(_ origin: TestOrigin, _ name: String, chunkSize: Int, size: Int) -> [[Int]] {
    origin.requests(for: name).compactMap { request -> [Int]? in
      guard request.method == "GET" else { return nil }
      var start = 0
      if let range = request.range, range.hasPrefix("bytes=") {
        start = Int(range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)[0]) ?? 0
      }
      let end = min(size, start + request.bodyBytesSent)
      let first = (start + chunkSize - 1) / chunkSize
      // The last chunk is whole at the end of the object even if short.
      let last = end == size ? (size - 1) / chunkSize : end / chunkSize - 1
      return first <= last ? Array(first...last) : []
    }
  }

  static func assertNoChunkTwice(_ lists: [[Int]], _ records: [RecordedRequest]) {
    var seen: Set<Int> = []
    var twice: Set<Int> = []
    for list in lists {
      for chunk in list where !seen.insert(chunk).inserted { twice.insert(chunk) }
    }
    #expect(twice.isEmpty, "chunks fetched twice: \(twice.sorted()); requests: \(records)")
  }

  /// Reads `path` from the proxy on a fresh connection with `range`, up to `limit` body bytes (then closes the
  /// connection, as a player does to seek), and returns the body.
  static func get(_ port: Int, _ path: String, range: String, limit: Int? = nil) async throws -> [UInt8] {
    try await blocking {
      let connection = try RawHTTPConnection(port: port, timeoutSeconds: 60)
      defer { connection.close() }
      try connection.sendRequest("GET", path, headers: [("Range", range)])
      var body: [UInt8] = []
      _ = try? connection.readResponse { bytes in
        guard limit.map({ body.count < $0 }) ?? true else { return }
        body.append(contentsOf: bytes)
        if let limit, body.count >= limit { connection.close() }
      }
      return body
    }
  }

  /// The repeatable cold play of an MP4 with its moov at the end, through the proxy: `bytes=0-` dropped after
  /// 300 KB, the last 10 KB, then `bytes=48-` to the end. The origin sends at most 1.1x the object (before:
  /// 1.34-2.0x: the dropped request was cancelled with its chunk, and the later ones overlapped).
  @Test(arguments: ["normal", "slow"])
  func aDroppedOpenRequestThenTheEndThenTheRestFetchesTheObjectOnce(mode: String) async throws {
    try await withProxy { fixture in
      let size = 4_800_000
      let name = "moov-at-end-\(mode)"
      let url =
        mode == "slow"
        ? fixture.origin.url(.slow, name, size: size, query: "delay-ms=2")
        : fixture.origin.url(.normal, name, size: size)
      let path = fixture.path(url)
      let port = fixture.endpoint.port
      let expected = TestOrigin.bytes(name: name, size: size)
      let head = try await Self.get(port, path, range: "bytes=0-", limit: 300_000)
      #expect(head.count >= 300_000 && Array(head.prefix(300_000)) == Array(expected.prefix(300_000)))
      let tail = try await Self.get(port, path, range: "bytes=-10240")
      #expect(sameBytes(tail, Array(expected.suffix(10240))).equal)
      let rest = try await Self.get(port, path, range: "bytes=48-")
      let check = sameBytes(rest, Array(expected.dropFirst(48)))
      #expect(check.equal, "\(check)")
      // Every origin request has ended (none still lingering) before counting.
      for _ in 0..<1000 where fixture.origin.requests(for: name).contains(where: { !$0.isComplete }) {
        try await Task.sleep(for: .milliseconds(10))
      }
      let records = fixture.origin.requests(for: name)
      let sent = fixture.origin.totalBodyBytes(for: name)
      #expect(Double(sent) <= 1.1 * Double(size), "origin sent \(sent) bytes for \(size): \(records)")
      Self.assertNoChunkTwice(Self.chunksSent(fixture.origin, name, chunkSize: 1 << 20, size: size), records)
    }
  }

  /// Five overlapping ranged readers of one cold object at once, as ffmpeg opens them: no chunk is fetched
  /// twice, every reader gets the right bytes, and the origin sends at most 1.1x the object. Before, a new
  /// request ran on over the chunks a request ahead of it was already fetching.
  @Test func overlappingConcurrentReadersFetchEachChunkOnce() async throws {
    try await withProxy { fixture in
      let size = 6_000_000
      let name = "five-readers"
      let path = fixture.path(fixture.origin.url(.slow, name, size: size, query: "delay-ms=2"))
      let port = fixture.endpoint.port
      let expected = TestOrigin.bytes(name: name, size: size)
      let starts = [0, 5_800_000, 2_000_000, 48, 0]
      let bodies = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
        for (index, start) in starts.enumerated() {
          group.addTask {
            try await Task.sleep(for: .milliseconds(20 * index))
            return (start, try await Self.get(port, path, range: "bytes=\(start)-"))
          }
        }
        return try await group.reduce(into: []) { $0.append($1) }
      }
      for (start, body) in bodies {
        let check = sameBytes(body, Array(expected.dropFirst(start)))
        #expect(check.equal, "bytes=\(start)-: \(check)")
      }
      for _ in 0..<1000 where fixture.origin.requests(for: name).contains(where: { !$0.isComplete }) {
        try await Task.sleep(for: .milliseconds(10))
      }
      let records = fixture.origin.requests(for: name)
      let sent = fixture.origin.totalBodyBytes(for: name)
      #expect(Double(sent) <= 1.1 * Double(size), "origin sent \(sent) bytes for \(size): \(records)")
      Self.assertNoChunkTwice(Self.chunksSent(fixture.origin, name, chunkSize: 1 << 20, size: size), records)
    }
  }

  static let chunkSize = 65536

  func withReader(
    readAhead: Int64, grace: Double = 0.25,
    _ body: (CachingReader, TestOrigin, MediaCache) async throws -> Void
  ) async throws {
    try await MediaCacheTestSupport.withReader(
      chunkSize: Self.chunkSize,
      configuration: .init(
        abandonedRequestReadAhead: readAhead, abandonedRequestGrace: .milliseconds(Int64(grace * 1000))),
      body)
  }

  /// A new origin request stops where a request still running ahead of it begins: reading from chunk 6, then
  /// from 0, asks the origin for chunks 0-5 only.
  @Test func aNewRequestStopsWhereARunningOneAheadBegins() async throws {
    try await withReader(readAhead: 0) { reader, origin, _ in
      let size = 12 * Self.chunkSize
      let url = origin.url(.slow, "ahead", size: size, query: "delay-ms=20")
      let ahead = try await reader.read(url, range: .from(Int64(6 * Self.chunkSize)))
      defer { ahead.close() }
      var aheadIterator = ahead.makeAsyncIterator()
      _ = try await aheadIterator.next()
      let behind = try await reader.read(url, range: .from(0))
      defer { behind.close() }
      var iterator = behind.makeAsyncIterator()
      _ = try await iterator.next()
      let ranges = origin.requests(for: "ahead").compactMap(\.range)
      #expect(
        ranges == ["bytes=\(6 * Self.chunkSize)-", "bytes=0-\(6 * Self.chunkSize - 1)"]
          || ranges == ["bytes=\(6 * Self.chunkSize)-\(size - 1)", "bytes=0-\(6 * Self.chunkSize - 1)"],
        "\(ranges)")
    }
  }

  /// An abandoned request takes what arrives within the grace, not its whole read-ahead: from an origin sending
  /// about 800 KB/s, a read-ahead of 100 chunks (6.4 MB) and a grace of 0.1 s, it stops after a few chunks.
  @Test func anAbandonedRequestStopsWhenItsGraceEnds() async throws {
    try await withReader(readAhead: Int64(100 * Self.chunkSize), grace: 0.1) { reader, origin, _ in
      let size = 200 * Self.chunkSize
      let url = origin.url(.slow, "grace", size: size, query: "delay-ms=20")
      let atClose: Int
      do {
        let bytes = try await reader.read(url, range: .from(0))
        var iterator = bytes.makeAsyncIterator()
        _ = try await iterator.next()
        atClose = origin.requests(for: "grace").first?.bodyBytesSent ?? 0
        bytes.close()
      }
      let records = try await origin.waitForCompletedRequests(for: "grace", count: 1, timeout: .seconds(30))
      #expect(records.count == 1)
      // 0.1 s at 800 KB/s is 80 KB: the chunk it was in, one or two more, and what was in transit (generous).
      // Counted from the reader's close: until then the fetch reads ahead (up to 100 chunks), and a loaded
      // machine can take a while to hand the reader its first piece.
      let afterClose = (records.first?.bodyBytesSent ?? 0) - atClose
      #expect(afterClose < 16 * Self.chunkSize, "\(atClose) bytes sent at the close, then \(records)")
    }
  }

  /// An origin that sends 4 chunks at once and then pauses 15 s: a reader drops its open-ended read after the
  /// first piece, the grace ends with the request on a chunk boundary, and the request is stopped then, not
  /// when the origin sends again (an origin that sends in bursts would send a whole burst for nothing). The
  /// origin sees the request end within the grace plus a margin, having sent the 4 chunks only. (The pause was
  /// 4 s: in a test process whose cooperative pool was busy with other suites, this test's own task left the
  /// read seconds late, after the origin's next send; the long pause leaves that stall out of the verdict, and
  /// a request left running is still seen, 15 s after the reader left instead of 2.5.)
  @Test func anAbandonedRequestOnAChunkBoundaryStopsWhenItsGraceEnds() async throws {
    try await withReader(readAhead: Int64(100 * Self.chunkSize), grace: 0.2) { reader, origin, _ in
      let size = 40 * Self.chunkSize
      let url = origin.url(.slow, "pause", size: size, query: "burst=\(4 * Self.chunkSize)&delay-ms=15000")
      let closed: ContinuousClock.Instant
      do {
        let bytes = try await reader.read(url, range: .from(0))
        var iterator = bytes.makeAsyncIterator()
        _ = try await iterator.next()
        // All of the burst is sent (and, on loopback, received a moment later) before the reader leaves.
        for _ in 0..<500 where (origin.requests(for: "pause").first?.bodyBytesSent ?? 0) < 4 * Self.chunkSize
        {
          try await Task.sleep(for: .milliseconds(10))
        }
        try await Task.sleep(for: .milliseconds(200))
        bytes.close()
        closed = .now
      }
      let records = try await origin.waitForCompletedRequests(for: "pause", count: 1, timeout: .seconds(30))
      let waited = ContinuousClock.now - closed
      #expect(records.count == 1)
      // Within the grace and a margin for a loaded machine's polling task, long before the origin's next send.
      #expect(waited < .seconds(10), "the origin request ended \(waited) after the reader left")
      #expect(records.first?.bodyBytesSent == 4 * Self.chunkSize, "\(records)")
    }
  }

  /// Bytes that arrived while no reader waited are handed over within a few milliseconds even if the origin
  /// then pauses: a reader that takes its first piece, is busy for 0.3 s (the rest of a burst of 2.5 chunks
  /// arrives meanwhile) and then reads on gets the whole burst at once (the 2 complete chunks from the cache,
  /// the half chunk from the fetch), not when the origin sends again 30 s later (the bound leaves a loaded
  /// machine's test task seconds to get the pool).
  @Test func bytesThatArriveWhileNoReaderWaitsAreHandedOverBeforeTheOriginSendsAgain() async throws {
    try await withReader(readAhead: 0) { reader, origin, _ in
      let burst = 5 * Self.chunkSize / 2
      let url = origin.url(.slow, "batch", size: 40 * Self.chunkSize, query: "burst=\(burst)&delay-ms=30000")
      let bytes = try await reader.read(url, range: .from(0))
      defer { bytes.close() }
      var iterator = bytes.makeAsyncIterator()
      var received = try await iterator.next()?.count ?? 0
      try await Task.sleep(for: .milliseconds(300))
      let started = ContinuousClock.now
      while received < burst, let piece = try await iterator.next() { received += piece.count }
      let waited = ContinuousClock.now - started
      #expect(received >= burst)
      #expect(waited < .seconds(15), "the rest of the burst came \(waited) after the reader asked")
    }
  }

  /// A reader that drops an open-ended read after its first piece leaves the request running for at most the
  /// read-ahead (2 chunks here) within its grace, then it stops where its bytes end, every byte it got cached
  /// (whole chunks and a span); a reader arriving while it runs joins it instead of asking the origin again.
  @Test func anAbandonedOpenRequestFillsItsReadAheadThenStops() async throws {
    try await withReader(readAhead: Int64(2 * Self.chunkSize)) { reader, origin, cache in
      let size = 40 * Self.chunkSize
      // About 400 KB/s (a 64 KiB chunk per 160 ms), so a loaded machine noticing the reader's close late still
      // stops well inside the bound below (the full test suite on 2 cores has seen the close take effect after
      // chunk 11 at twice this speed, and once after the bound: the bound is on bytes sent, not on a chunk a
      // close noticed in time would stop before).
      let url = origin.url(.slow, "abandoned", size: size, query: "delay-ms=40")
      let atClose: Int
      do {
        let bytes = try await reader.read(url, range: .from(0))
        var iterator = bytes.makeAsyncIterator()
        _ = try await iterator.next()
        // Counted at the close: a loaded machine's test task may get here seconds after the first piece.
        atClose = origin.totalBodyBytes(for: "abandoned")
        bytes.close()
      }
      let records = try await origin.waitForCompletedRequests(
        for: "abandoned", count: 1, timeout: .seconds(30))
      #expect(records.count == 1)
      let sent = records[0].bodyBytesSent
      // What arrived before the close plus at most 2 chunks, and no more than a few pieces in transit.
      #expect(
        sent > 0 && sent - atClose < 3 * Self.chunkSize + (1 << 20), "\(records), \(atClose) at the close")
      let id = cache.objectID(for: url)
      // Committed when the object closes (the request's last commit may come after the origin logged it). What
      // the origin sent is cached as one run from byte 0, all of it but the pieces still in the socket when the
      // request was stopped (the origin counts them as sent; nobody read them).
      let inTransit: Int64 = 64 << 10
      func cachedRun() throws -> Int64 {
        let first = try cache.store.readManifest(id)?.presentByteRanges.ranges.first
        return first?.lowerBound == 0 ? first!.upperBound : 0
      }
      for _ in 0..<1000 where try cachedRun() < Int64(sent) - inTransit {
        try await Task.sleep(for: .milliseconds(10))
      }
      try await Task.sleep(for: .milliseconds(200))  // a last commit still on its way
      let manifest = try #require(try cache.store.readManifest(id))
      let ranges = manifest.presentByteRanges.ranges
      #expect(
        ranges.count == 1 && ranges[0].lowerBound == 0 && ranges[0].upperBound <= Int64(sent)
          && ranges[0].upperBound >= Int64(sent) - inTransit, "\(ranges) for \(records)")

      // Abandoned again further on; a reader arriving while it runs joins it.
      do {
        let second = try await reader.read(url, range: .from(Int64(3 * Self.chunkSize)))
        var secondIterator = second.makeAsyncIterator()
        _ = try await secondIterator.next()
        second.close()
      }
      let joined = try await reader.read(url, range: .from(Int64(4 * Self.chunkSize)))
      defer { joined.close() }
      var data = Data()
      for try await piece in joined { data.append(piece) }
      #expect(data == Data(TestOrigin.bytes(name: "abandoned", size: size).dropFirst(4 * Self.chunkSize)))
      // The joiner shares the running request (or, on a machine so loaded that it arrives after the request
      // stopped, starts one where it ended): no byte is fetched twice.
      let all = origin.requests(for: "abandoned")
      #expect(all.count == 2 || all.count == 3, "\(all)")
      #expect(all.reduce(0) { $0 + $1.bodyBytesSent } <= size, "\(all)")
    }
  }
}
