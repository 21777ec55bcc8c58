import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// The two store invariants as seen through `FileHandleAssetDataManager`: a corrupt byte is never returned, and
/// a manifest never lists a chunk whose bytes are not on disk.
@Suite struct AssetDataIntegrityTests {
  static let chunk = 4096
  static let id = ObjectID(CacheKey("https://example.com/integrity.mp4"))

  /// Stores `data` as a complete object and closes it.
  static func storeComplete(_ data: Data, in store: ShardedStore) throws {
    let manager = try FileHandleAssetDataManager(store: store, id: id)
    try manager.setContentLength(Int64(data.count))
    try manager.write(data, at: 0)
    try manager.close()
  }

  /// The CRC-32 of chunk `index` of the object's data file as it is on disk now.
  static func diskCRC(ofChunk index: Int, in store: ShardedStore, length: Int) throws -> UInt32 {
    let bytes = try fileBytes(store.paths(for: id).data)
    return CRC32.checksum(bytes[(index * chunk)..<min(length, (index + 1) * chunk)])
  }

  @Test(arguments: [true, false])
  func flippedByteFailsAFullReadAndTheChunkIsDropped(writable: Bool) async throws {
    try await withStore { store in
      let data = randomBytes(count: 4 * Self.chunk + 300, seed: 21)
      try Self.storeComplete(data, in: store)
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 2 * 4096 + 17)
      let corruptCRC = try Self.diskCRC(ofChunk: 2, in: store, length: data.count)
      let goodCRC = CRC32.checksum(data[8192..<12_288])

      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, writable: writable)
      defer { try? manager.close() }
      #expect(throws: StoreError.corruptChunk(Self.id, chunk: 2, expected: goodCRC, actual: corruptCRC)) {
        try manager.read(0..<Int64(data.count))
      }
      // The drop is committed: every later reader sees the chunk as missing, not as wrong bytes.
      let committed = try #require(try store.readManifest(Self.id))
      #expect(committed.presentChunks.ranges == [0..<2, 3..<5])
      #expect(throws: StoreError.notCached(Self.id, missing: [8192..<9000])) {
        try manager.read(8000..<9000)
      }
      // Other chunks still read, verified.
      #expect(try manager.read(0..<8192) == data[0..<8192])
      #expect(try manager.read(12_288..<Int64(data.count)) == data[12_288...])
    }
  }

  @Test func partialReadOfACorruptChunkThrowsToo() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 22)
      try Self.storeComplete(data, in: store)
      // The flipped byte is outside the five bytes read: the whole chunk is checked anyway.
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 4096 + 4000)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
      defer { try? manager.close() }
      expectStoreError({ _ = try manager.read(4196..<4201) }) {
        $0.code == .corruptChunk && $0.objectID == Self.id && $0.chunk == 1
      }
      #expect(try store.readManifest(Self.id)?.isPresent(1) == false)
      #expect(try manager.read(0..<4096) == data[0..<4096])
    }
  }

  @Test func streamedReadStopsAtACorruptChunk() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 23)
      try Self.storeComplete(data, in: store)
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 8192)
      let (received, error) = try await Self.stream(0..<Int64(data.count), in: store)
      #expect(error?.code == .corruptChunk && error?.chunk == 2, "\(String(describing: error))")
      #expect(received == data[0..<8192])
      // Dropped from the manifest (so it is fetched again), and only it.
      #expect(try store.readManifest(Self.id)?.isPresent(2) == false)
      #expect(try store.readManifest(Self.id)?.isPresent(1) == true)
    }
  }

  /// A data file cut short under present chunks: a streamed read gives the chunks still whole, then
  /// `corruptChunk` for the first one the file no longer holds whole (a short read fails its check), and
  /// never the bytes that are left of it.
  @Test func streamedReadStopsWhereTheDataFileIsShort() async throws {
    try await withStore { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 29)
      try Self.storeComplete(data, in: store)
      #expect(truncate(store.paths(for: Self.id).data, off_t(Self.chunk + 1000)) == 0)
      let (received, error) = try await Self.stream(100..<Int64(data.count), in: store)
      #expect(error?.code == .corruptChunk && error?.chunk == 1, "\(String(describing: error))")
      #expect(received == data[100..<Self.chunk])
    }
  }

  /// The bytes a streamed read of `range` (`bytes(in:)`, a read-only handle) gave before it ended, and the
  /// `StoreError` it ended with (nil: it ended without one).
  private static func stream(_ range: Range<Int64>, in store: ShardedStore) async throws -> (
    Data, StoreError?
  ) {
    let manager = try FileHandleAssetDataManager(store: store, id: id, writable: false)
    defer { try? manager.close() }
    var received = Data()
    do {
      for try await piece in manager.bytes(in: range) { received.append(piece) }
      return (received, nil)
    } catch let error as StoreError {
      return (received, error)
    }
  }

  @Test func aRewrittenChunkIsServedAgainAfterTheDrop() async throws {
    try await withStore { store in
      let data = randomBytes(count: 2 * Self.chunk, seed: 24)
      try Self.storeComplete(data, in: store)
      try flipByte(atPath: store.paths(for: Self.id).data, offset: 5000)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      expectStoreError({ _ = try manager.read(0..<8192) }) {
        $0.code == .corruptChunk
      }
      try manager.write(data[4096..<8192], at: 4096)  // fetched again
      #expect(try manager.read(0..<8192) == data)
      try manager.flush()
      #expect(try store.readManifest(Self.id)?.isComplete == true)
    }
  }

  // MARK: A manifest never lists a chunk before its bytes

  @Test(arguments: Durability.allCases)
  func chunksReachTheManifestOnlyAfterTheirBytes(_ durability: Durability) async throws {
    try await withStore(durability: durability) { store in
      let data = randomBytes(count: 3 * Self.chunk, seed: 25)
      let never = FileHandleAssetDataManager.CommitPolicy(bytes: 1 << 40, interval: .seconds(1e9))
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, commitPolicy: never)
      defer { try? manager.close() }
      try manager.setContentLength(Int64(data.count))
      try manager.write(data[0..<4096], at: 0)
      #expect(manager.manifest.isPresent(0))
      #expect(try store.readManifest(Self.id) == nil, "nothing is committed before flush()")
      try manager.flush()
      var committed = try #require(try store.readManifest(Self.id))
      #expect(committed.chunkCRCs == [0: try Self.diskCRC(ofChunk: 0, in: store, length: data.count)])

      try manager.write(data[4096..<12_288], at: 4096)
      committed = try #require(try store.readManifest(Self.id))
      #expect(committed.presentChunks.ranges == [0..<1], "chunks 1 and 2 wait for the next commit")
      try manager.flush()
      committed = try #require(try store.readManifest(Self.id))
      #expect(committed.presentChunks.ranges == [0..<3])
    }
  }

  @Test func everyManifestOnDiskMatchesTheBytesOnDisk() async throws {
    try await withStore { store in
      let data = randomBytes(count: 6 * Self.chunk + 123, seed: 26)
      // Commit after every completed chunk, so manifests are written while the object is being filled; with
      // no backlog allowed, a batch is on disk before the next one is handed to the background queue.
      let eager = FileHandleAssetDataManager.CommitPolicy(bytes: 1, interval: .seconds(1e9), maxBacklog: 1)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, commitPolicy: eager)
      defer { try? manager.close() }
      try manager.setContentLength(Int64(data.count))
      var listedCounts: [Int] = []
      for start in stride(from: 0, to: data.count, by: 1500) {
        try manager.write(data[start..<min(data.count, start + 1500)], at: Int64(start))
        guard let committed = try store.readManifest(Self.id) else { continue }
        listedCounts.append(committed.chunkCRCs.count)
        for (index, crc) in committed.chunkCRCs {
          #expect(try Self.diskCRC(ofChunk: index, in: store, length: data.count) == crc, "chunk \(index)")
        }
      }
      // The manifest grew while writing (it was not written only at the end).
      #expect(listedCounts.contains { $0 > 0 && $0 < 7 })
      try manager.flush()
      #expect(try store.readManifest(Self.id)?.chunkCRCs.count == 7)
    }
  }

  /// A batch committed in the background that fails (here `tmp/` is a file, so no manifest can be staged) is
  /// reported by the next call, lists nothing, and is committed by the next commit that can.
  @Test(arguments: Durability.allCases)
  func aFailedBackgroundCommitIsReportedAndRetried(_ durability: Durability) async throws {
    try await withStore(durability: durability) { store in
      let data = randomBytes(count: 4 * Self.chunk, seed: 27)
      let eager = FileHandleAssetDataManager.CommitPolicy(bytes: 1, interval: .seconds(1e9), maxBacklog: 1)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id, commitPolicy: eager)
      defer { try? manager.close() }
      try manager.setContentLength(Int64(data.count))
      try FileManager.default.removeItem(atPath: store.tmpDirectory)
      #expect(FileManager.default.createFile(atPath: store.tmpDirectory, contents: Data("x".utf8)))
      var failures = 0
      for start in stride(from: 0, to: data.count, by: Self.chunk) {
        do { try manager.write(data[start..<start + Self.chunk], at: Int64(start)) } catch {
          failures += 1
          #expect(error is StoreError, "\(error)")
          try manager.write(data[start..<start + Self.chunk], at: Int64(start))  // reported once
        }
      }
      #expect(throws: StoreError.self) { try manager.flush() }
      #expect(failures >= 1, "a background failure was reported to the writer")
      #expect(try store.readManifest(Self.id) == nil, "nothing was listed")
      #expect(manager.manifest.presentChunks.ranges == [0..<4], "the writer still holds its chunks")

      try FileManager.default.removeItem(atPath: store.tmpDirectory)
      try manager.flush()
      let committed = try #require(try store.readManifest(Self.id))
      #expect(committed.presentChunks.ranges == [0..<4])
      for index in 0..<4 {
        #expect(
          committed.crc(ofChunk: index) == (try Self.diskCRC(ofChunk: index, in: store, length: data.count)))
      }
    }
  }

  // MARK: Lengths

  /// Two full chunks were written while the length was unknown; a length that cuts into them must be refused
  /// (`setContentLength` documents `outOfBounds` "if bytes were already written past it"). Accepting it would
  /// truncate the data file under chunks whose CRCs cover the cut bytes.
  @Test(arguments: [5000, 100] as [Int64])
  func settingALengthShorterThanTheWrittenBytesIsRefused(_ shorter: Int64) async throws {
    try await withStore { store in
      let data = randomBytes(count: 2 * Self.chunk, seed: 27)
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      try manager.write(data, at: 0)
      expectStoreError({ try manager.setContentLength(shorter) }) {
        $0.code == .outOfBounds
      }
      #expect(manager.contentLength == nil)
      // Whatever the call did, bytes that were written correctly must still read back.
      #expect(try manager.read(0..<shorter) == data[0..<Int(shorter)])
      #expect(try fileBytes(store.paths(for: Self.id).data) == data)
    }
  }

  @Test func aPartialChunkPastANewLengthIsRefused() async throws {
    try await withStore { store in
      let manager = try FileHandleAssetDataManager(store: store, id: Self.id)
      defer { try? manager.close() }
      try manager.write(randomBytes(count: 3000, seed: 28), at: 4096)
      expectStoreError({ try manager.setContentLength(6000) }) {
        $0 == .outOfBounds(Self.id, range: 4096..<7096, length: 6000)
      }
      try manager.setContentLength(7096)
      #expect(manager.manifest.presentChunks.ranges == [1..<2])
    }
  }
}
