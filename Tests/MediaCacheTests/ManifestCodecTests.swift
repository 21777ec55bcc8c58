import Foundation
import MediaCacheTestSupport
import PropertyBased
import Testing

@testable import MediaCache

@Suite struct ManifestCodecTests {
  @Test func everyFieldRoundTrips() throws {
    var manifest = richManifest()
    manifest.versionTag = 0xDEAD_BEEF
    let decoded = try ManifestCodec.decode(try ManifestCodec.encode(manifest), expectedID: manifest.objectID)
    #expect(decoded == manifest)
    // Field by field, so that a failure says which one.
    #expect(decoded.objectID == ObjectID(CacheKey("https://example.com/rich.mp4")))
    #expect(decoded.contentLength == 100_000)
    #expect(decoded.chunkSize == 4096)
    #expect(decoded.presentChunks.ranges == [0..<3, 5..<6, 9..<11, 24..<25])
    for index in [0, 1, 2, 5, 9, 10, 24] {
      #expect(decoded.crc(ofChunk: index) == UInt32(truncatingIfNeeded: index &* 0x9E37_79B9 &+ 7))
    }
    #expect(decoded.crc(ofChunk: 3) == nil)
    #expect(decoded.contentType == "video/mp4")
    #expect(decoded.etag == "\"abc-123\"")
    #expect(decoded.lastModified == "Tue, 14 Nov 2023 22:13:20 GMT")
    #expect(decoded.createdAt == Date(timeIntervalSince1970: 1_700_000_000.5))
    #expect(decoded.isPinned)
    #expect(decoded.userMetadata == Data("hello".utf8))
    #expect(decoded.versionTag == 0xDEAD_BEEF)
    // The last chunk is short: 100_000 - 24 * 4096 bytes.
    #expect(decoded.byteRange(ofChunk: 24) == 98_304..<100_000)
  }

  @Test func unknownLengthRoundTrips() throws {
    var manifest = Manifest(
      objectID: ObjectID(CacheKey("live")), chunkSize: 1 << 20, createdAt: Date(timeIntervalSince1970: 0))
    manifest.setChunk(0, crc: 1)
    manifest.setChunk(1_000_000, crc: 2)
    manifest.setChunk(Int(UInt32.max) - 1, crc: 3)
    let bytes = try ManifestCodec.encode(manifest)
    #expect(bytes[HeaderOffset.flags] & 0b10 == 0, "length-known flag must be clear")
    let decoded = try ManifestCodec.decode(bytes)
    #expect(decoded == manifest)
    #expect(decoded.contentLength == nil)
    #expect(decoded.chunkCount == nil)
    #expect(!decoded.isComplete)
  }

  @Test func zeroLengthObjectIsCompleteWithoutChunks() throws {
    let manifest = Manifest(objectID: ObjectID(CacheKey("empty")), chunkSize: 4096, contentLength: 0)
    let decoded = try ManifestCodec.decode(try ManifestCodec.encode(manifest))
    #expect(decoded.contentLength == 0)
    #expect(decoded.isComplete)
    #expect(decoded.presentChunks.isEmpty)
  }

  @Test func emptyStringsEncodeAsAbsent() throws {
    let id = ObjectID(CacheKey("strings"))
    let created = Date(timeIntervalSince1970: 1_600_000_000)
    let empty = Manifest(
      objectID: id, chunkSize: 4096, createdAt: created, contentType: "", etag: "", lastModified: "")
    let absent = Manifest(objectID: id, chunkSize: 4096, createdAt: created)
    #expect(try ManifestCodec.encode(empty) == ManifestCodec.encode(absent))
    let decoded = try ManifestCodec.decode(try ManifestCodec.encode(empty))
    #expect(decoded.contentType == nil)
    #expect(decoded.etag == nil)
    #expect(decoded.lastModified == nil)
  }

  @Test func layoutOfTheFixedHeader() throws {
    var manifest = richManifest()
    manifest.versionTag = 0x0102_0304
    let bytes = Array(try ManifestCodec.encode(manifest))
    func le<T: FixedWidthInteger>(_ offset: Int, as type: T.Type) -> T {
      (0..<MemoryLayout<T>.size).reduce(T(0)) { $0 | T(bytes[offset + $1]) << ($1 * 8) }
    }
    #expect(Array(bytes[0..<4]) == Array("MCMF".utf8))
    #expect(bytes[HeaderOffset.major] == 1)
    #expect(bytes[HeaderOffset.minor] == 0)
    #expect(le(HeaderOffset.flags, as: UInt16.self) == 0b11, "pinned and length-known")
    #expect(Array(bytes[HeaderOffset.objectID..<HeaderOffset.contentLength]) == manifest.objectID.bytes)
    #expect(le(HeaderOffset.contentLength, as: UInt64.self) == 100_000)
    #expect(le(HeaderOffset.chunkSize, as: UInt32.self) == 4096)
    #expect(le(HeaderOffset.versionTag, as: UInt32.self) == 0x0102_0304)
    #expect(le(HeaderOffset.createdAt, as: UInt64.self) == 1_700_000_000_500)
    #expect(le(HeaderOffset.runCount, as: UInt32.self) == 4)
    #expect(le(HeaderOffset.presentCount, as: UInt32.self) == 7)
    #expect(le(HeaderOffset.firstRun, as: UInt32.self) == 0)
    #expect(le(HeaderOffset.firstRun + 4, as: UInt32.self) == 3)
    // Header, 4 runs, 7 CRCs, then 1+9, 2+9, 1+29 and 4+5 bytes of fields, then the CRC.
    #expect(bytes.count == 72 + 4 * 8 + 7 * 4 + 10 + 11 + 30 + 9 + 4)
    #expect(le(bytes.count - 4, as: UInt32.self) == CRC32.checksum(bytes.dropLast(4)))
  }

  @Test func createdAtKeepsWholeMilliseconds() throws {
    let manifest = Manifest(
      objectID: ObjectID(CacheKey("time")), chunkSize: 4096,
      createdAt: Date(timeIntervalSince1970: 1_700_000_000.123_9))
    // Whole milliseconds, within a millisecond of the time given.
    let milliseconds = manifest.createdAt.timeIntervalSince1970 * 1000
    #expect(abs(milliseconds - milliseconds.rounded()) < 1e-3)
    #expect(abs(manifest.createdAt.timeIntervalSince1970 - 1_700_000_000.123_9) < 0.001)
    #expect(try ManifestCodec.decode(try ManifestCodec.encode(manifest)).createdAt == manifest.createdAt)
  }

  /// A manifest read from disk must re-encode to the same creation time. These whole-millisecond values were
  /// found by the round-trip property below; `Double(ms) / 1000 * 1000` lands just below `ms` for them.
  @Test(arguments: [170_242_804_211, 1_086_485_061_899, 2_163_088_714_687] as [Int64])
  func createdAtOfADecodedManifestSurvivesReEncoding(_ milliseconds: Int64) throws {
    var bytes = try encodedBody(Manifest(objectID: ObjectID(CacheKey("time")), chunkSize: 4096))
    poke(UInt64(milliseconds), at: HeaderOffset.createdAt, in: &bytes)
    let decoded = try ManifestCodec.decode(withRecomputedCRC(bytes))
    let reEncoded = Array(try ManifestCodec.encode(decoded))
    let storedAgain = reEncoded[HeaderOffset.createdAt..<(HeaderOffset.createdAt + 8)]
      .reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    #expect(
      storedAgain == UInt64(milliseconds),
      "re-encoding moved createdAt by \(Int64(storedAgain) - milliseconds) ms")
    #expect(try ManifestCodec.decode(Data(reEncoded)) == decoded)
  }

  @Test func randomManifestsRoundTrip() async throws {
    await propertyCheck(count: 300, input: Gen.uint64()) { seed in
      let manifest = randomManifest(seed: seed)
      let bytes = try ManifestCodec.encode(manifest)
      let decoded = try ManifestCodec.decode(bytes, expectedID: manifest.objectID)
      expectSameManifest(decoded, manifest, "seed \(seed)")
      #expect(try ManifestCodec.encode(decoded) == bytes, "seed \(seed)")
    }
  }

  @Test func largestFieldsRoundTrip() throws {
    var manifest = Manifest(
      objectID: ObjectID(CacheKey("big")), chunkSize: Manifest.maxChunkSize,
      contentLength: Manifest.maxContentLength)
    manifest.contentType = String(repeating: "t", count: Manifest.maxContentTypeBytes)
    manifest.etag = String(repeating: "é", count: Manifest.maxETagBytes / 2)
    manifest.lastModified = String(repeating: "m", count: Manifest.maxLastModifiedBytes)
    manifest.userMetadata = randomBytes(count: 64 * 1024, seed: 42)
    manifest.setChunk(Int(Manifest.maxContentLength / Int64(Manifest.maxChunkSize)) - 1, crc: 9)
    let decoded = try ManifestCodec.decode(try ManifestCodec.encode(manifest))
    #expect(decoded == manifest)
    #expect(decoded.userMetadata.count == 65_536)
    #expect(decoded.etag?.utf8.count == 1024)
  }

  @Test func oversizedFieldsAreRefused() throws {
    let base = Manifest(objectID: ObjectID(CacheKey("limits")), chunkSize: 4096)
    var manifest = base
    manifest.userMetadata = Data(count: 64 * 1024 + 1)
    #expect(throws: StoreError.fieldTooLarge(field: "user metadata", size: 65_537, limit: 65_536)) {
      try ManifestCodec.encode(manifest)
    }
    manifest = base
    manifest.etag = String(repeating: "e", count: 1025)
    #expect(throws: StoreError.fieldTooLarge(field: "ETag", size: 1025, limit: 1024)) {
      try ManifestCodec.encode(manifest)
    }
    manifest = base
    // 128 characters, 256 UTF-8 bytes: the limit counts bytes.
    manifest.contentType = String(repeating: "é", count: 128)
    #expect(throws: StoreError.fieldTooLarge(field: "content type", size: 256, limit: 255)) {
      try ManifestCodec.encode(manifest)
    }
    manifest = base
    manifest.lastModified = String(repeating: "l", count: 256)
    #expect(throws: StoreError.fieldTooLarge(field: "Last-Modified", size: 256, limit: 255)) {
      try ManifestCodec.encode(manifest)
    }
  }

  /// Chunk indices are stored as 32-bit numbers: a manifest with a larger index must be refused with an error,
  /// not crash the process.
  @Test func encodingAChunkIndexBeyond32BitsDoesNotTrap() async {
    await #expect(processExitsWith: .success) {
      var manifest = Manifest(objectID: ObjectID(CacheKey("huge")), chunkSize: 4096)
      manifest.setChunk(1 << 33, crc: 1)
      do {
        let bytes = try ManifestCodec.encode(manifest)
        // Accepted: then it must decode to the same chunk.
        guard (try? ManifestCodec.decode(bytes))?.isPresent(1 << 33) == true else { exit(1) }
      } catch {
        // Refused with an error: fine.
      }
    }
  }
}

// MARK: Random manifests

/// A random valid manifest: any chunk size, known or unknown length, several runs of chunks, random strings
/// (multi-byte UTF-8 included) up to each field's limit, metadata up to 64 KiB, any creation time the format
/// stores.
func randomManifest(seed: UInt64) -> Manifest {
  var rng = SeededRandom(seed: seed)
  let chunkSize = [
    4096, 65_536, 1 << 20, Manifest.maxChunkSize, Int.random(in: 4096...(64 << 20), using: &rng),
  ]
  .randomElement(using: &rng)!
  let contentLength: Int64? =
    switch Int.random(in: 0..<4, using: &rng) {
    case 0: nil
    case 1: Int64.random(in: 0...10_000_000, using: &rng)
    case 2: Int64.random(in: 0...Manifest.maxContentLength, using: &rng)
    default: Int64(chunkSize) * Int64.random(in: 1...1000, using: &rng)
    }
  let milliseconds = Int64.random(in: 0...(1 << 50), using: &rng)
  var manifest = Manifest(
    objectID: ObjectID(CacheKey("https://example.com/\(rng.next())")), chunkSize: chunkSize,
    contentLength: contentLength, createdAt: Date(timeIntervalSince1970: Double(milliseconds) / 1000),
    contentType: randomText(maxBytes: 255, using: &rng), etag: randomText(maxBytes: 1024, using: &rng),
    lastModified: randomText(maxBytes: 255, using: &rng), isPinned: Bool.random(using: &rng))
  manifest.versionTag = UInt32.random(in: 0...UInt32.max, using: &rng)
  let metadataCount = Bool.random(using: &rng) ? 64 * 1024 : Int.random(in: 0...300, using: &rng)
  manifest.userMetadata = randomBytes(count: metadataCount, seed: rng.next())
  // Chunk indices are stored as UInt32.
  let limit = min(manifest.chunkCount.map(Int64.init) ?? Int64(UInt32.max), Int64(UInt32.max))
  if limit > 0 {
    for _ in 0..<Int.random(in: 0...8, using: &rng) {
      let start = Int64.random(in: 0..<limit, using: &rng)
      let end = min(limit, start + Int64.random(in: 1...20, using: &rng))
      for index in start..<end {
        manifest.setChunk(Int(index), crc: UInt32.random(in: 0...UInt32.max, using: &rng))
      }
    }
  }
  return manifest
}

/// nil, or a non-empty string of ASCII and multi-byte characters of at most `maxBytes` UTF-8 bytes.
func randomText(maxBytes: Int, using rng: inout SeededRandom) -> String? {
  if Int.random(in: 0..<4, using: &rng) == 0 { return nil }
  let pieces = ["a", "Z", "0", "\"", " ", "/", ";", "é", "日", "🎬", "\u{0}", "W/"]
  let target = Int.random(in: 1...maxBytes, using: &rng)
  var text = ""
  while true {
    let piece = pieces.randomElement(using: &rng)!
    if text.utf8.count + piece.utf8.count > target { break }
    text += piece
  }
  return text.isEmpty ? "x" : text
}
