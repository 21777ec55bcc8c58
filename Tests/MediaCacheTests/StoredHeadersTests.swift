import Foundation
import MediaCacheTestSupport
import Testing

@testable import MediaCache

/// Manifest 1.3's stored response headers (`StoredHeaders`, docs/FORMAT.md section 3.9): bounded, checked,
/// written only when present, refused whole when damaged, and merged like the content type.
@Suite struct StoredHeadersTests {
  static let id = ObjectID(CacheKey("https://example.com/headers.mp4"))
  static let time = Date(timeIntervalSince1970: 1_750_000_000.123)

  static func headers(_ fields: [(String, String)], at time: Date = time) -> StoredHeaders {
    StoredHeaders(receivedAt: time, fields: fields.map { StoredHeaders.Field(name: $0.0, value: $0.1) })
  }

  static func manifest(_ stored: StoredHeaders?) -> Manifest {
    var manifest = Manifest(objectID: id, chunkSize: 4096, contentLength: 10_000, etag: "\"v1\"")
    manifest.setChunk(0, crc: 7)
    manifest.storedHeaders = stored
    return manifest
  }

  @Test func storedHeadersMakeAOneThreeManifestThatRoundTrips() throws {
    let plain = try ManifestCodec.encode(Self.manifest(nil))
    #expect(plain[5] == 0, "no stored headers, spans or group: still written as 1.0")
    let stored = Self.headers([
      ("Cache-Control", "public, max-age=60"), ("Date", "Sat, 01 Jun 2024 12:00:00 GMT"),
      ("X-Custom", "a\tb"), ("X-Custom", "second"),
    ])
    let manifest = Self.manifest(stored)
    let bytes = try ManifestCodec.encode(manifest)
    #expect(bytes[5] == 3)
    let block = stored.fields.reduce(0) { $0 + 1 + $1.name.utf8.count + 2 + $1.value.utf8.count }
    #expect(
      bytes.count == plain.count + 4 + 1 + 8 + 2 + block, "span count, group length, time, length, block")
    let decoded = try ManifestCodec.decode(bytes, expectedID: Self.id)
    #expect(decoded == manifest)
    #expect(decoded.storedHeaders?.receivedAt == Date(timeIntervalSince1970: 1_750_000_000.123))
    #expect(decoded.storedHeaders?.values("x-custom") == ["a\tb", "second"])
    #expect(decoded.storedHeaders?.first("CACHE-CONTROL") == "public, max-age=60")
    // Empty stored headers are still 1.3 (a response with no end-to-end field but its time).
    let empty = try ManifestCodec.encode(Self.manifest(Self.headers([])))
    #expect(empty[5] == 3)
    #expect(try ManifestCodec.decode(empty).storedHeaders == Self.headers([]))
  }

  @Test func invalidFieldsAreLeftOutAndTheBlockIsBounded() {
    let checked = Self.headers([
      ("Good", "ok"), ("Bad Name", "x"), ("", "x"), ("Split", "a\r\nInjected: 1"), ("Nul", "a\u{0}b"),
      ("Last", "fine"),
    ])
    #expect(checked.fields.map(\.name) == ["Good", "Last"])
    // Fields past 16 KiB in all are not kept; those before are.
    let big = String(repeating: "v", count: 4000)
    let many = Self.headers((0..<10).map { ("X-Big-\($0)", big) })
    #expect(many.fields.count == 4, "4 x ~4010 bytes fit in 16 KiB, a fifth does not")
    #expect(many.encodedSize <= StoredHeaders.maxBytes)
    #expect(throws: Never.self) { try ManifestCodec.encode(Self.manifest(many)) }
  }

  @Test func aDamagedBlockIsRefusedWhole() throws {
    let bytes = Array(try ManifestCodec.encode(Self.manifest(Self.headers([("A", "1"), ("B", "2")]))))
    func sealed(_ body: [UInt8]) -> Data {
      Data(body + withUnsafeBytes(of: CRC32.checksum(body).littleEndian, Array.init))
    }
    let body = Array(bytes.dropLast(4))
    // The block is the last 10 bytes before the CRC: [1,'A',1,0,'1', 1,'B',1,0,'2'].
    var badName = body
    badName[body.count - 4] = UInt8(ascii: " ")
    #expect(throws: ManifestError.invalidField(name: "stored header 1", reason: "not a valid header field")) {
      try ManifestCodec.decode(sealed(badName))
    }
    var badValue = body
    badValue[body.count - 1] = 0x0A
    #expect(throws: ManifestError.invalidField(name: "stored header 1", reason: "not a valid header field")) {
      try ManifestCodec.decode(sealed(badValue))
    }
    // A value length that runs past the block's end.
    var long = body
    long[body.count - 3] = 9
    #expect(throws: ManifestError.invalidField(name: "stored header 1", reason: "runs past the block's end"))
    {
      try ManifestCodec.decode(sealed(long))
    }
    // A block length over the bound, and an implausible time.
    var oversized = body
    let lengthAt = body.count - 10 - 2
    oversized.replaceSubrange(lengthAt..<(lengthAt + 2), with: [0x01, 0x40 + 0x01])  // 16 641
    #expect(throws: ManifestError.invalidField(name: "stored headers", reason: "16641 bytes exceeds 16384")) {
      try ManifestCodec.decode(sealed(oversized))
    }
    var future = body
    future.replaceSubrange(
      (lengthAt - 8)..<lengthAt, with: withUnsafeBytes(of: Int64(1 << 51).littleEndian, Array.init))
    #expect(throws: ManifestError.self) { try ManifestCodec.decode(sealed(future)) }
    // One byte after the block in a 1.3 manifest is refused; in a 1.4 one it is ignored.
    #expect(throws: ManifestError.trailingBytes(count: 1)) { try ManifestCodec.decode(sealed(body + [0xAA])) }
    var newer = body + [0xAA]
    newer[5] = 4
    #expect(try ManifestCodec.decode(sealed(newer)).storedHeaders?.values("B") == ["2"])
  }

  @Test func aNotModifiedReplacesTheFieldsItHasAndKeepsTheRest() {
    let stored = Self.headers([("Cache-Control", "max-age=1"), ("X-A", "1"), ("X-A", "2"), ("X-B", "b")])
    let later = Date(timeIntervalSince1970: 1_750_000_100)
    let updated = stored.updated(
      by: Self.headers([("cache-control", "max-age=600"), ("X-A", "3")], at: later))
    #expect(updated.receivedAt == later)
    #expect(updated.values("Cache-Control") == ["max-age=600"])
    #expect(updated.values("X-A") == ["3"])
    #expect(updated.values("X-B") == ["b"])
  }

  @Test func theMergeReplacesHeadersUnlessTheWriterWasSuperseded() {
    let old = Self.headers([("Cache-Control", "max-age=1")])
    let new = Self.headers([("Cache-Control", "max-age=600")], at: Self.time.addingTimeInterval(5))
    var change = ManifestChange()
    change.storedHeaders = new
    var base = Self.manifest(new)
    let merged = change.merge(into: Self.manifest(old), base: base).manifest
    #expect(merged.storedHeaders == new)
    // A writer that did not set them keeps the disk's.
    #expect(ManifestChange().merge(into: Self.manifest(old), base: base).manifest.storedHeaders == old)
    // A writer of an older version (the disk was reset since) does not write its headers over the new one's.
    var disk = Self.manifest(old)
    disk.versionTag = 99
    base.versionTag = 0
    let superseded = change.merge(into: disk, base: base)
    #expect(superseded.superseded)
    #expect(superseded.manifest.storedHeaders == old)
  }

  @Test func headersAreCommittedAndAResetDropsThem() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try MediaCache(
        configuration: MediaCache.Configuration(
          directory: FilePath("\(directory)/cache"), chunkSize: 4096, memoryCostLimit: 1 << 20,
          durability: .durable, maxSize: nil, maxAge: nil))
      let id = cache.objectID(for: "k")
      let manager = try FileHandleAssetDataManager(store: cache.store, id: id, writable: true)
      try manager.write(Data(repeating: 1, count: 100), at: 0)
      try manager.setStoredHeaders(Self.headers([("X-Seen", "yes")]))
      try manager.flush()
      #expect(try cache.store.readManifest(id)?.storedHeaders?.values("X-Seen") == ["yes"])
      try manager.reset(contentLength: 50, etag: "\"v2\"", lastModified: nil)
      #expect(manager.manifest.storedHeaders == nil)
      try manager.close()
      #expect(try cache.store.readManifest(id)?.storedHeaders == nil)
    }
  }
}
