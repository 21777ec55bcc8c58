import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// `FileHandleAssetDataManager` writing and reading real files of a real `ShardedStore` (chunk size 4096).
@Suite struct AssetDataManagerTests {
  static let chunk = 4096
  static let id = ObjectID(CacheKey("https://example.com/asset.mp4"))

  /// The CRC-32 of each chunk of `data`, computed here from the bytes.
  static func chunkCRCs(of data: Data) -> [Int: UInt32] {
    var result: [Int: UInt32] = [:]
    for (index, start) in stride(from: 0, to: data.count, by: chunk).enumerated() {
      result[index] = CRC32.checksum(data[start..<min(data.count, start + chunk)])
    }
    return result
  }

  /// Closes `manager`, reopens the object read-only and checks every byte, the committed manifest and the
  /// data file's length.
  static func expectStored(
    _ data: Data, in store: ShardedStore, sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    let committed = try #require(try store.readManifest(id), sourceLocation: sourceLocation)
    #expect(committed.contentLength == Int64(data.count), sourceLocation: sourceLocation)
    #expect(committed.isComplete, sourceLocation: sourceLocation)
    #expect(committed.chunkCRCs == chunkCRCs(of: data), sourceLocation: sourceLocation)
    #expect(try fileBytes(store.paths(for: id).data) == data, sourceLocation: sourceLocation)
    let reader = try FileHandleAssetDataManager(store: store, id: id, writable: false)
    defer { try? reader.close() }
    #expect(try reader.read(0..<Int64(data.count)) == data, sourceLocation: sourceLocation)
  }

  @Test(arguments: Durability.allCases)
  func sequentialWritesSurviveCloseAndReopen(_ durability: Durability) async throws {
    try await withStore(durability: durability) { store in
      let data = randomBytes(count: 5 * Self.chunk + 1234, seed: 1)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      try manager.setContentLength(Int64(data.count))
      for start in stride(from: 0, to: data.count, by: Self.chunk) {
        try manager.write(data[start..<min(data.count, start + Self.chunk)], at: Int64(start))
      }
      try manager.close()
      try Self.expectStored(data, in: store)
    }
  }

  @Test(arguments: Durability.allCases)
  func outOfOrderWrites(_ durability: Durability) async throws {
    try await withStore(durability: durability) { store in
      let data = randomBytes(count: 7 * Self.chunk + 99, seed: 2)
      // Pieces of uneven sizes that cross chunk boundaries, written in a shuffled order.
      var cuts = [0, data.count]
      var rng = SeededRandom(seed: 2)
      for _ in 0..<12 { cuts.append(Int.random(in: 1..<data.count, using: &rng)) }
      cuts = Array(Set(cuts)).sorted()
      let pieces = zip(cuts, cuts.dropFirst()).map { $0..<$1 }.shuffled(using: &rng)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      try manager.setContentLength(Int64(data.count))
      for piece in pieces { try manager.write(data[piece], at: Int64(piece.lowerBound)) }
      #expect(manager.manifest.isComplete)
      try manager.close()
      try Self.expectStored(data, in: store)
    }
  }

  @Test(arguments: Durability.allCases)
  func tinyPiecesInBothDirections(_ durability: Durability) async throws {
    try await withStore(durability: durability) { store in
      let data = randomBytes(count: 3 * Self.chunk + 777, seed: 3)
      let sizes = [1, 2, 3, 7, 13, 100, 511, 1, 4095, 4097, 333]
      var pieces: [Range<Int>] = []
      var cursor = 0
      while cursor < data.count {
        let end = min(data.count, cursor + sizes[pieces.count % sizes.count])
        pieces.append(cursor..<end)
        cursor = end
      }
      // Front to back with the length unknown until the end, then back to front for a second object.
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      for piece in pieces { try manager.write(data[piece], at: Int64(piece.lowerBound)) }
      try manager.setContentLength(Int64(data.count))
      try manager.close()
      try Self.expectStored(data, in: store)

      let otherID = ObjectID(CacheKey("reversed"))
      let reversed = try FileHandleAssetDataManager(store: store, id: otherID)
      try reversed.setContentLength(Int64(data.count))
      for piece in pieces.reversed() { try reversed.write(data[piece], at: Int64(piece.lowerBound)) }
      #expect(reversed.manifest.chunkCRCs == Self.chunkCRCs(of: data))
      #expect(try reversed.read(0..<Int64(data.count)) == data)
      try reversed.close()
    }
  }

  @Test func overlappingRewritesKeepTheLastBytesWritten() async throws {
    try await withStore { store in
      let data = randomBytes(count: 2 * Self.chunk, seed: 4)
      let garbage = randomBytes(count: Self.chunk, seed: 5)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      try manager.setContentLength(Int64(data.count))
      // Wrong bytes first, then overlapping writes of the right ones: the chunk's CRC is of the final bytes.
      try manager.write(garbage[0..<3000], at: 0)
      try manager.write(data[1000..<2500], at: 1000)
      try manager.write(data[0..<1500], at: 0)
      try manager.write(data[2000..<6000], at: 2000)
      try manager.write(data[5000..<8192], at: 5000)
      #expect(manager.manifest.chunkCRCs == Self.chunkCRCs(of: data))
      // A present chunk is not rewritten: its bytes were verified.
      try manager.write(garbage, at: 0)
      try manager.close()
      try Self.expectStored(data, in: store)
    }
  }

  @Test func unknownLengthThenSetContentLengthCompletesTheShortLastChunk() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * Self.chunk + 1000, seed: 6)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      try manager.write(data, at: 0)
      #expect(manager.contentLength == nil)
      #expect(manager.manifest.presentChunks.ranges == [0..<3])
      // The bytes of the last chunk are a span until the length says the chunk is whole; readable meanwhile.
      #expect(manager.manifest.allSpans.map(\.range) == [12_288..<13_288])
      #expect(try manager.read(12_000..<13_288) == data[12_000..<13_288])
      #expect(throws: StoreError.notCached(Self.id, missing: [13_288..<13_300])) {
        try manager.read(12_000..<13_300)
      }
      try manager.setContentLength(Int64(data.count))
      #expect(manager.manifest.presentChunks.ranges == [0..<4])
      #expect(try manager.read(12_000..<13_288) == data[12_000..<13_288])
      // Declaring the same length again is fine; another one is a conflict.
      try manager.setContentLength(Int64(data.count))
      #expect(throws: StoreError.lengthConflict(Self.id, recorded: 13_288, declared: 13_289)) {
        try manager.setContentLength(13_289)
      }
      try manager.close()
      try Self.expectStored(data, in: store)
    }
  }

  @Test func readingMissingBytesNamesExactlyTheMissingRanges() async throws {
    try await withStore { store in
      let data = randomBytes(count: 10 * Self.chunk, seed: 7)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      try manager.setContentLength(Int64(data.count))
      for index in [1, 2, 5] {
        let range = (index * Self.chunk)..<((index + 1) * Self.chunk)
        try manager.write(data[range], at: Int64(range.lowerBound))
      }
      try manager.write(data[28_672..<30_000], at: 28_672)  // part of chunk 7 only: a span
      #expect(
        throws: StoreError.notCached(
          Self.id, missing: [100..<4096, 12_288..<20_480, 24_576..<28_672, 30_000..<40_000])
      ) { try manager.read(100..<40_000) }
      #expect(try manager.read(28_672..<29_000) == data[28_672..<29_000])
      #expect(throws: StoreError.notCached(Self.id, missing: [30_000..<30_001])) {
        try manager.read(29_000..<30_001)
      }
      #expect(try manager.read(4096..<12_288) == data[4096..<12_288])
      #expect(try manager.read(20_480..<20_480).isEmpty)
    }
  }

  @Test func outOfBoundsReadsAndWritesThrow() async throws {
    try await withStore { store in
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      for length in [-1, Manifest.maxContentLength + 1] {
        expectStoreError({ try manager.setContentLength(length) }) {
          $0.code == .outOfBounds
        }
      }
      expectStoreError({ try manager.write(Data([1]), at: Manifest.maxContentLength) }) {
        $0.code == .outOfBounds
      }
      try manager.setContentLength(10_000)
      #expect(throws: StoreError.outOfBounds(Self.id, range: 9_000..<10_001, length: 10_000)) {
        try manager.read(9_000..<10_001)
      }
      #expect(throws: StoreError.outOfBounds(Self.id, range: 9_999..<10_001, length: 10_000)) {
        try manager.write(Data([1, 2]), at: 9_999)
      }
      expectStoreError({ try manager.write(Data([1]), at: -1) }) {
        $0.code == .outOfBounds
      }
      expectStoreError({ _ = try manager.read(-5..<10) }) {
        $0.code == .outOfBounds
      }
      // Nothing was written by the refused calls.
      #expect(manager.manifest.presentChunks.isEmpty)
    }
  }

  @Test func streamedReadYieldsChunkSizedPiecesThatConcatenateToTheBytes() async throws {
    try await withStore { store in
      let data = randomBytes(count: 6 * Self.chunk + 500, seed: 8)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      try manager.setContentLength(Int64(data.count))
      try manager.write(data, at: 0)
      for range in [1000..<20_000, 0..<Int64(data.count), 4096..<8192, 5..<6] as [Range<Int64>] {
        var joined = Data()
        var pieces: [Int] = []
        for try await piece in manager.bytes(in: range) {
          pieces.append(piece.count)
          joined.append(piece)
        }
        #expect(joined == data[Int(range.lowerBound)..<Int(range.upperBound)], "range \(range)")
        #expect(pieces.allSatisfy { $0 > 0 && $0 <= Self.chunk }, "pieces \(pieces)")
        // Only the first and the last piece may be partial chunks.
        #expect(pieces.dropFirst().dropLast().allSatisfy { $0 == Self.chunk }, "pieces \(pieces)")
      }
    }
  }

  /// An iterator copied after a piece shares the piece being read ahead: each copy reads on from where it was,
  /// and neither waits forever for the shared read.
  @Test func aCopiedIteratorReadsOnAsTheOriginalDoes() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 10)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      try manager.write(data, at: 0)
      var original = manager.bytes(in: 0..<Int64(data.count)).makeAsyncIterator()
      #expect(try await original.next() == data[0..<Self.chunk])
      var copy = original
      #expect(try await original.next() == data[Self.chunk..<2 * Self.chunk])
      #expect(try await copy.next() == data[Self.chunk..<2 * Self.chunk])
      #expect(try await copy.next() == data[2 * Self.chunk..<3 * Self.chunk])
      #expect(try await copy.next() == nil)
      #expect(try await original.next() == data[2 * Self.chunk..<3 * Self.chunk])
    }
  }

  @Test func streamedReadEndsWithTheErrorAfterTheGoodPieces() async throws {
    try await withStore { store in
      let data = randomBytes(count: 4 * Self.chunk, seed: 9)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      try manager.setContentLength(Int64(data.count))
      try manager.write(data[0..<8192], at: 0)
      var received = Data()
      await #expect(throws: StoreError.notCached(Self.id, missing: [8192..<12_288])) {
        for try await piece in manager.bytes(in: 0..<16_384) { received.append(piece) }
      }
      #expect(received == data[0..<8192])
    }
  }

  @Test func closedAndReadOnlyManagersRefuseWork() async throws {
    try await withStore { store in
      #expect(throws: StoreError.notFound(Self.id)) {
        try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
      }
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      try manager.setContentLength(4096)
      try manager.write(randomBytes(count: 4096, seed: 10), at: 0)
      try manager.close()
      try manager.close()  // a second close does nothing
      #expect(throws: StoreError.closed(Self.id)) { try manager.read(0..<1) }
      #expect(throws: StoreError.closed(Self.id)) { try manager.write(Data([1]), at: 0) }

      let reader = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
      defer { try? reader.close() }
      #expect(!reader.isWritable)
      expectStoreError({ try reader.write(Data([1]), at: 0) }) { $0.code == .io }
      #expect(try reader.read(0..<4096) == randomBytes(count: 4096, seed: 10))
    }
  }

  /// A writer that opened a new object and closed without committing anything (an origin that failed, a
  /// client that went away before the first chunk) leaves no data file: one without a manifest is an orphan
  /// that `cache-fsck` reports as damage. One another writer still holds stays, and so does a committed object.
  @Test(arguments: Durability.allCases)
  func aWriterThatCommittedNothingLeavesNoDataFile(_ durability: Durability) async throws {
    try await withStore(durability: durability) { store in
      let paths = store.paths(for: Self.id)
      let alone = try FileHandleAssetDataManager(store: store, id: Self.id)
      try alone.close()  // its origin never answered: nothing to commit
      #expect(!FileManager.default.fileExists(atPath: paths.data))
      #expect(try store.readManifest(Self.id) == nil)

      let first = try FileHandleAssetDataManager(store: store, id: Self.id)
      let second = try FileHandleAssetDataManager(store: store, id: Self.id)
      try first.close()
      #expect(FileManager.default.fileExists(atPath: paths.data), "the second writer still has it")
      try second.write(randomBytes(count: 4096, seed: 2), at: 0)
      try second.close()
      #expect(try store.readManifest(Self.id)?.chunkCRCs.count == 1)

      let later = try FileHandleAssetDataManager(store: store, id: Self.id)
      try later.close()
      #expect(FileManager.default.fileExists(atPath: paths.data), "a committed object stays")
      let reader = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
      defer { try? reader.close() }
      #expect(try reader.read(0..<4096) == randomBytes(count: 4096, seed: 2))
    }
  }
}
