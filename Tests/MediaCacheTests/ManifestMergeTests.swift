import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// `ManifestChange.merge`: what a commit does with the manifest another writer committed meanwhile.
@Suite struct ManifestMergeTests {
  static let id = ObjectID(CacheKey("https://example.com/merge.mp4"))

  static func manifest(
    length: Int64? = 40_960, etag: String? = "\"v1\"", chunks: [Int: UInt32] = [:], chunkSize: Int = 4096
  ) -> Manifest {
    var manifest = Manifest(
      objectID: id, chunkSize: chunkSize, contentLength: length,
      createdAt: Date(timeIntervalSince1970: 1_000),
      etag: etag)
    for (index, crc) in chunks { manifest.setChunk(index, crc: crc) }
    return manifest
  }

  @Test func addedChunksOfTwoWritersAreUnioned() {
    let disk = Self.manifest(chunks: [0: 10, 1: 11])  // committed by writer A
    var change = ManifestChange()
    change.added = [2: 12, 5: 15]
    let base = Self.manifest(chunks: [2: 12, 5: 15])  // writer B's view: it never saw A's chunks
    let result = change.merge(into: disk, base: base)
    #expect(!result.superseded)
    #expect(result.manifest.presentChunks.ranges == [0..<3, 5..<6])
    #expect([0, 1, 2, 5].map { result.manifest.crc(ofChunk: $0) } == [10, 11, 12, 15])
  }

  @Test func droppedChunkIsRemovedOnlyIfTheDiskStillHasTheFailedCRC() {
    var change = ManifestChange()
    change.dropped = [3: 0xAAAA]
    let base = Self.manifest()

    let same = change.merge(into: Self.manifest(chunks: [2: 1, 3: 0xAAAA]), base: base).manifest
    #expect(!same.isPresent(3))
    #expect(same.crc(ofChunk: 2) == 1)

    // Another writer rewrote chunk 3 after this one read the bad bytes: its good chunk stays.
    let rewritten = change.merge(into: Self.manifest(chunks: [2: 1, 3: 0xBBBB]), base: base).manifest
    #expect(rewritten.crc(ofChunk: 3) == 0xBBBB)
  }

  @Test(arguments: [
    ("different ETag", ManifestMergeTests.manifest(etag: "\"v2\"", chunks: [0: 1, 7: 7])),
    ("different length", ManifestMergeTests.manifest(length: 50_000, chunks: [0: 1, 7: 7])),
    ("different chunk size", ManifestMergeTests.manifest(chunks: [0: 1, 7: 7], chunkSize: 8192)),
  ])
  func incompatibleVersionSupersedesTheWriter(_ label: String, _ disk: Manifest) {
    var change = ManifestChange()
    change.added = [3: 33, 4: 44]
    let base = Self.manifest(chunks: [3: 33, 4: 44])
    let result = change.merge(into: disk, base: base)
    #expect(result.superseded, "\(label)")
    // The writer's chunks are of the old version: none of them is mixed into the new one.
    #expect(result.manifest.chunkCRCs == [0: 1, 7: 7], "\(label)")
    #expect(result.manifest.versionIdentity == disk.versionIdentity, "\(label)")
  }

  @Test func differentVersionTagsAreNeverMerged() {
    // Neither side has validators, but the disk's object was replaced (reset) by another writer.
    var disk = Self.manifest(etag: nil, chunks: [0: 1])
    disk.versionTag = 99
    var change = ManifestChange()
    change.added = [1: 2]
    let result = change.merge(into: disk, base: Self.manifest(etag: nil, chunks: [1: 2]))
    #expect(result.superseded)
    #expect(result.manifest.chunkCRCs == [0: 1])
  }

  @Test func compatibleWriterTeachesWhatTheDiskDoesNotKnow() {
    let disk = Self.manifest(length: nil, etag: nil, chunks: [0: 1])
    var base = Self.manifest(length: 10_000, etag: "\"v1\"", chunks: [1: 2])
    base.lastModified = "Mon, 01 Jan 2024 00:00:00 GMT"
    var change = ManifestChange()
    change.added = [1: 2, 7: 9]  // 10_000 bytes are 3 chunks: chunk 7 cannot exist
    let result = change.merge(into: disk, base: base)
    #expect(!result.superseded)
    #expect(result.manifest.contentLength == 10_000)
    #expect(result.manifest.etag == "\"v1\"")
    #expect(result.manifest.lastModified == "Mon, 01 Jan 2024 00:00:00 GMT")
    #expect(result.manifest.chunkCRCs == [0: 1, 1: 2])
  }

  @Test func resetReplacesTheDiskChunks() {
    var disk = Self.manifest(chunks: [0: 1, 1: 2, 2: 3])
    disk.isPinned = true
    disk.userMetadata = Data("kept".utf8)
    var base = Self.manifest(length: 8192, etag: "\"v2\"", chunks: [0: 40])
    base.versionTag = 5
    base.createdAt = Date(timeIntervalSince1970: 2_000)
    var change = ManifestChange()
    change.reset = true
    change.added = [0: 40]
    let result = change.merge(into: disk, base: base)
    #expect(result.manifest.chunkCRCs == [0: 40])
    #expect(result.manifest.contentLength == 8192)
    #expect(result.manifest.etag == "\"v2\"")
    #expect(result.manifest.versionTag == 5)
    // What belongs to the app, not to the origin's version, survives the reset.
    #expect(result.manifest.isPinned)
    #expect(result.manifest.userMetadata == Data("kept".utf8))
    #expect(result.manifest.createdAt == Date(timeIntervalSince1970: 1_000))
  }

  @Test func withoutAManifestOnDiskTheWriterViewIsTheTruth() {
    var change = ManifestChange()
    change.added = [4: 4]
    change.dropped = [1: 1]
    let base = Self.manifest(chunks: [1: 1, 2: 2])
    let result = change.merge(into: nil, base: base).manifest
    #expect(result.chunkCRCs == [2: 2, 4: 4])
  }

  @Test func metadataChangesApply() {
    var disk = Self.manifest(chunks: [0: 1])
    disk.contentType = "video/mp4"
    var change = ManifestChange()
    change.isPinned = true
    change.userMetadata = Data([9])
    change.contentType = ""  // clears
    #expect(!change.isEmpty)
    let result = change.merge(into: disk, base: Self.manifest()).manifest
    #expect(result.isPinned)
    #expect(result.userMetadata == Data([9]))
    #expect(result.contentType == nil)
    #expect(result.chunkCRCs == [0: 1])
    #expect(ManifestChange().isEmpty)
  }

  // MARK: Through the store

  @Test func twoOpenWritersOfOneObjectBothKeepTheirChunks() async throws {
    try await withStore { store in
      let data = randomBytes(count: 4 * 4096, seed: 11)
      let a = try FileHandleAssetDataManager(store: store, id: Self.id)
      let b = try FileHandleAssetDataManager(store: store, id: Self.id)
      try a.setContentLength(Int64(data.count))
      try b.setContentLength(Int64(data.count))
      try a.write(data[0..<4096], at: 0)
      try b.write(data[8192..<16384], at: 8192)
      try a.flush()
      try b.flush()  // merges with a's commit instead of overwriting it
      try a.write(data[4096..<8192], at: 4096)
      try a.close()
      try b.close()
      let committed = try #require(try store.readManifest(Self.id))
      #expect(committed.presentChunks.ranges == [0..<4])
      #expect(committed.isComplete)
      let reader = try FileHandleAssetDataManager(store: store, id: Self.id, writable: false)
      defer { try? reader.close() }
      #expect(try reader.read(0..<Int64(data.count)) == data)
    }
  }
}
