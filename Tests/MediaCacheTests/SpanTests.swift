import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Spans: bytes of incomplete chunks, kept with their CRC (manifest 1.1), readable, committed, joined into
/// whole chunks.
@Suite struct SpanTests {
  static let chunk = 4096
  static let id = ObjectID(CacheKey("https://example.com/spans.mp4"))

  @Test func spansRoundTripAsVersion1_1AndAManifestWithoutIsStill1_0() throws {
    var manifest = Manifest(objectID: Self.id, chunkSize: Self.chunk, contentLength: 20_000)
    manifest.setChunk(0, crc: 7)
    #expect(try Array(ManifestCodec.encode(manifest))[5] == 0)
    manifest.addSpan(.init(range: 4100..<4200, crc: 1))
    manifest.addSpan(.init(range: 8192..<8200, crc: 2))  // chunk 2, touching chunk 1's end is allowed
    manifest.addSpan(.init(range: 19_000..<20_000, crc: 3))
    let bytes = try ManifestCodec.encode(manifest)
    #expect(Array(bytes)[5] == 1)
    let decoded = try ManifestCodec.decode(bytes)
    #expect(decoded == manifest)
    #expect(decoded.allSpans.map(\.range) == [4100..<4200, 8192..<8200, 19_000..<20_000])
    #expect(decoded.presentByteRanges.ranges == [0..<4096, 4100..<4200, 8192..<8200, 19_000..<20_000])
    #expect(decoded.cachedRun(at: 4150) == 50 && decoded.cachedRun(at: 4200) == 0)
    #expect(decoded.nextCachedByte(from: 4200, before: .max) == 8192)
    #expect(decoded.nextCachedByte(from: 8200, before: 19_000) == nil)
  }

  @Test func touchingSpansJoinAndACoveredChunkBecomesPresent() throws {
    let data = randomBytes(count: Self.chunk, seed: 3)
    var manifest = Manifest(objectID: Self.id, chunkSize: Self.chunk, contentLength: 10_000)
    let crc = { (range: Range<Int>) in CRC32.checksum(data[range]) }
    #expect(manifest.addSpan(.init(range: 100..<400, crc: crc(100..<400))) == nil)
    #expect(manifest.addSpan(.init(range: 400..<4096, crc: crc(400..<4096))) == nil)
    #expect(manifest.spans[0] == [.init(range: 100..<4096, crc: crc(100..<4096))])
    // A span inside a recorded one changes nothing; one overlapping in part replaces what it overlaps.
    manifest.addSpan(.init(range: 200..<300, crc: 99))
    #expect(manifest.spans[0]?.count == 1)
    #expect(manifest.addSpan(.init(range: 0..<100, crc: crc(0..<100))) == CRC32.checksum(data))
    #expect(manifest.crc(ofChunk: 0) == CRC32.checksum(data) && manifest.spans[0] == nil)
  }

  @Test func theDecoderRefusesSpansThatAreNotCanonical() throws {
    var base = Manifest(objectID: Self.id, chunkSize: Self.chunk, contentLength: 10_000)
    base.setChunk(1, crc: 5)
    func encoded(_ entries: [(UInt32, UInt32, UInt32)]) throws -> Data {
      var manifest = base
      manifest.addSpan(.init(range: 10..<20, crc: 1))
      var bytes = Array(try ManifestCodec.encode(manifest).dropLast(4 + 4 + 16))
      var count = UInt32(entries.count).littleEndian
      withUnsafeBytes(of: &count) { bytes += $0 }
      for (index, offset, length) in entries {
        for value in [index, offset, length, 0xABCD] {
          var little = value.littleEndian
          withUnsafeBytes(of: &little) { bytes += $0 }
        }
      }
      var crc = CRC32.checksum(Data(bytes)).littleEndian
      withUnsafeBytes(of: &crc) { bytes += $0 }
      return Data(bytes)
    }
    #expect(try ManifestCodec.decode(encoded([(0, 10, 10), (2, 0, 5)])).allSpans.count == 2)
    func refused(_ entries: [(UInt32, UInt32, UInt32)]) -> Bool {
      (try? ManifestCodec.decode(encoded(entries))) == nil
    }
    #expect(refused([(0, 10, 0)]), "empty")
    #expect(refused([(0, 10, 10), (0, 20, 5)]), "touching")
    #expect(refused([(0, 10, 10), (0, 15, 10)]), "overlapping")
    #expect(refused([(0, 30, 10), (0, 10, 10)]), "out of order")
    #expect(refused([(1, 0, 10)]), "in a present chunk")
    #expect(refused([(0, 0, 4096)]), "a whole chunk")
    #expect(refused([(2, 1800, 100)]), "past the length")
    #expect(refused([(0, 4000, 200)]), "past the chunk")
    #expect(refused([(3, 0, 10)]), "past the last chunk")
  }

  @Test(arguments: Durability.allCases)
  func spansAreCommittedReadAfterReopenAndJoinedIntoChunks(_ durability: Durability) async throws {
    try await withStore(durability: durability) { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 9)
      try Self.storePart(of: data, 1000..<5000, in: store)
      let committed = try #require(try store.readManifest(Self.id))
      #expect(committed.presentByteRanges.ranges == [1000..<5000])
      #expect(committed.allSpans.map(\.range) == [1000..<4096, 4096..<5000])
      do {
        let reader = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
        defer { try? reader.close() }
        #expect(try reader.read(1500..<4500) == data[1500..<4500])
        #expect(throws: StoreError.notCached(Self.id, missing: [999..<1000])) { try reader.read(999..<1001) }
      }
      // Another writer brings the bytes before the span: chunk 0 becomes present with the right CRC.
      do {
        let writer = try FileHandleAssetDataManager(store: store, id: Self.id)
        try writer.write(data[0..<1000], at: 0)
        #expect(writer.manifest.crc(ofChunk: 0) == CRC32.checksum(data[0..<4096]))
        try writer.close()
      }
      let joined = try #require(try store.readManifest(Self.id))
      #expect(joined.crc(ofChunk: 0) == CRC32.checksum(data[0..<4096]))
      #expect(joined.allSpans.map(\.range) == [4096..<5000])
    }
  }

  /// Writes `data[range]` into the object, `data.count` bytes long, and closes the writer: spans where the
  /// part does not fill its chunks.
  private static func storePart(of data: Data, _ range: Range<Int>, in store: ShardedStore) throws {
    let writer = try FileHandleAssetDataManager(store: store, id: id)
    try writer.setContentLength(Int64(data.count))
    try writer.write(data[range], at: Int64(range.lowerBound))
    try writer.close()
  }

  @Test func aCorruptSpanIsDroppedAndReportedNotReturned() async throws {
    try await withStore { store in
      let data = randomBytes(count: 2 * Self.chunk, seed: 11)
      try Self.storePart(of: data, 100..<900, in: store)
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 500)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      #expect(throws: StoreError.self) { try manager.read(200..<300) }
      #expect(manager.manifest.allSpans.isEmpty)
      try manager.close()
      #expect(try store.readManifest(Self.id)?.allSpans.isEmpty == true)
    }
  }

  /// A streamed read (`bytes(in:)`, read on the I/O executor and checked where the consumer runs) gives the bytes
  /// of spans as `read` does, and ends at a corrupt span, which is dropped.
  @Test func aStreamedReadGivesSpansAndStopsAtACorruptOne() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 12)
      try Self.storePart(of: data, 1000..<9000, in: store)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      var pieces: [Data] = []
      for try await piece in manager.bytes(in: 1500..<8500) { pieces.append(piece) }
      #expect(pieces.map(\.count) == [4096 - 1500, 4096, 8500 - 8192])
      #expect(pieces.reduce(Data(), +) == data[1500..<8500])
      // The span of chunk 2 (8192..<9000) goes bad.
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 8600)
      var received = Data()
      do {
        for try await piece in manager.bytes(in: 2000..<8800) { received.append(piece) }
        Issue.record("the corrupt span was streamed")
      } catch let error as StoreError {
        #expect(error.code == .corruptChunk && error.chunk == 2, "\(error)")
      }
      #expect(received == data[2000..<8192])
      #expect(manager.manifest.allSpans.map(\.range) == [1000..<4096])
      try manager.close()
      #expect(try store.readManifest(Self.id)?.allSpans.map(\.range) == [1000..<4096])
    }
  }

  /// `cache-fsck` and the compactor's scrub check spans as they check chunks: a clean span is no finding, a bad
  /// one is a chunk-checksum finding that `--repair` (or the scrub) drops, leaving the rest.
  @Test func fsckAndTheScrubCheckSpans() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 12)
      do {
        let writer = try FileHandleAssetDataManager(store: store, id: Self.id)
        try writer.setContentLength(Int64(data.count))
        try writer.write(data[0..<Self.chunk], at: 0)
        try writer.write(data[5000..<6000], at: 5000)
        try writer.write(data[9000..<9100], at: 9000)
        try writer.close()
      }
      let clean = try await Self.check(store)
      #expect(clean.findings.isEmpty, "\(clean.findings)")
      #expect(clean.totals.bytesVerified == Int64(Self.chunk + 1000 + 100))
      let cleanScrub = try await Self.scrub(store)
      var expectedScrub = ShardedStore.ScrubResult()
      expectedScrub.chunksVerified = 1
      expectedScrub.bytesVerified = Int64(Self.chunk + 1000 + 100)
      #expect(cleanScrub == expectedScrub, "\(cleanScrub)")
      // One byte of the first span goes bad.
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 5500)
      let found = try await Self.check(store)
      #expect(found.findings.map(\.kind) == [.chunkChecksum], "\(found.findings)")
      #expect(found.findings.first?.chunk == 1)
      let scrubbed = try await Self.scrub(store, dryRun: true)
      #expect(scrubbed.droppedSpans == 1 && scrubbed.droppedChunks.isEmpty, "\(scrubbed)")
      let repaired = try await Self.check(store, repair: true)
      #expect(repaired.findings.map(\.action) == [.repaired], "\(repaired.findings)")
      let manifest = try #require(try store.readManifest(Self.id))
      #expect(manifest.presentByteRanges.ranges == [0..<4096, 9000..<9100])
      #expect(try await Self.check(store).findings.isEmpty)
    }
  }

  // The scrub skips an object whose lock another open file description holds, and the checker counts it busy.
  // In a test process that can be a child another test is starting: between its clone and its exec it holds a
  // copy of every descriptor of the process, close-on-exec ones too, and with it any `flock` taken through
  // them, after the owner closed its own (seen once in CI: the scrub skipped this object). Outside such a window
  // nothing holds this store's object, so a skip or a busy object is tried again, for up to a second.

  /// `ShardedStore.scrub` of `id`, tried again while it skips the object.
  private static func scrub(_ store: ShardedStore, dryRun: Bool = false) async throws
    -> ShardedStore.ScrubResult
  {
    var result = try store.scrub(Self.id, budget: 1 << 20, dryRun: dryRun)
    for _ in 0..<50 where result.skipped {
      try await Task.sleep(for: .milliseconds(20))
      result = try store.scrub(Self.id, budget: 1 << 20, dryRun: dryRun)
    }
    return result
  }

  /// A check of `store`, tried again while it finds an object busy.
  private static func check(_ store: ShardedStore, repair: Bool = false) async throws -> CheckReport {
    var report = try CacheChecker(root: FilePath(store.root), options: .init(repair: repair)).run()
    for _ in 0..<50 where report.totals.busy > 0 {
      try await Task.sleep(for: .milliseconds(20))
      report = try CacheChecker(root: FilePath(store.root), options: .init(repair: repair)).run()
    }
    return report
  }

  /// A span of the last chunk written while the length was unknown, that the length then shows to be the whole
  /// chunk, makes the chunk present (in the writer that learns the length and in the merge), so no manifest
  /// lists a span the decoder would refuse as a whole chunk.
  @Test func aSpanThatTheLengthMakesWholeBecomesAChunk() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * Self.chunk + 1000, seed: 13)
      let tail = Int64(3 * Self.chunk)..<Int64(data.count)
      do {
        let writer = try FileHandleAssetDataManager(store: store, id: Self.id)
        try writer.write(data[Int(tail.lowerBound)...], at: tail.lowerBound)
        try writer.close()
      }
      #expect(try store.readManifest(Self.id)?.allSpans.map(\.range) == [tail])
      let writer = try FileHandleAssetDataManager(store: store, id: Self.id)
      try writer.setContentLength(Int64(data.count))
      #expect(writer.manifest.crc(ofChunk: 3) == CRC32.checksum(data[Int(tail.lowerBound)...]))
      #expect(writer.manifest.allSpans.isEmpty)
      try writer.close()
      let committed = try #require(try store.readManifest(Self.id))
      #expect(committed.crc(ofChunk: 3) == CRC32.checksum(data[Int(tail.lowerBound)...]))
      #expect(committed.allSpans.isEmpty && committed.contentLength == Int64(data.count))
    }
  }
}
