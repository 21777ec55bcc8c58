import Foundation
import Testing

@testable import MediaCache

/// The committed bytes of a version 1.0 manifest. If the encoder or decoder changes the format, these tests
/// fail: caches written by earlier builds must stay readable, and a deliberate change needs a new version and a
/// new fixture.
@Suite struct GoldenManifestTests {
  static let fixturesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/manifest")
  static let goldenURL = fixturesDirectory.appendingPathComponent("golden-v1.manifest")

  static let goldenID = ObjectID(CacheKey("https://example.com/golden.mp4"))
  static let goldenCRCs: [Int: UInt32] = [
    0: 0x0123_4567, 1: 0x89AB_CDEF, 2: 0xDEAD_BEEF, 5: 0x0000_0001, 9: 0xFFFF_FFFF,
  ]
  static let goldenMetadata = Data([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF] + Array("golden".utf8))

  /// The golden manifest, built by hand. Only used to (re)generate the fixture; the test below spells out
  /// every value it expects instead of comparing with this.
  static func goldenManifest() -> Manifest {
    var manifest = Manifest(
      objectID: goldenID, chunkSize: 1 << 20, contentLength: 10_000_000,
      createdAt: Date(timeIntervalSince1970: 1_700_000_000.123), contentType: "video/mp4",
      etag: "\"golden-etag-1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT", isPinned: true,
      userMetadata: goldenMetadata)
    manifest.versionTag = 0x600D_F00D
    for (index, crc) in goldenCRCs { manifest.setChunk(index, crc: crc) }
    return manifest
  }

  /// `MEDIACACHE_WRITE_GOLDEN=1 swift test --filter writeGoldenFixture` writes the fixture from the current
  /// encoder. Run it only for a deliberate format change, then review and commit the new bytes.
  @Test(.enabled(if: ProcessInfo.processInfo.environment["MEDIACACHE_WRITE_GOLDEN"] == "1"))
  func writeGoldenFixture() throws {
    try FileManager.default.createDirectory(at: Self.fixturesDirectory, withIntermediateDirectories: true)
    try ManifestCodec.encode(Self.goldenManifest()).write(to: Self.goldenURL)
  }

  @Test func goldenFixtureDecodesToTheDocumentedValues() throws {
    let bytes = try Data(contentsOf: Self.goldenURL)
    let manifest = try ManifestCodec.decode(bytes, expectedID: Self.goldenID)

    // SHA-256 of "https://example.com/golden.mp4" (as printed by `sha256sum`).
    #expect(manifest.objectID.hex == "e4ff7f05b9bb9e30f2be72cd625ab83ef6c320f14734ed233c6fa41bdeb74f93")
    #expect(manifest.contentLength == 10_000_000)
    #expect(manifest.chunkSize == 1_048_576)
    #expect(manifest.chunkCount == 10)
    #expect(manifest.presentChunks.ranges == [0..<3, 5..<6, 9..<10])
    #expect(manifest.crc(ofChunk: 0) == 0x0123_4567)
    #expect(manifest.crc(ofChunk: 1) == 0x89AB_CDEF)
    #expect(manifest.crc(ofChunk: 2) == 0xDEAD_BEEF)
    #expect(manifest.crc(ofChunk: 5) == 0x0000_0001)
    #expect(manifest.crc(ofChunk: 9) == 0xFFFF_FFFF)
    for absent in [3, 4, 6, 7, 8] { #expect(manifest.crc(ofChunk: absent) == nil) }
    #expect(manifest.contentType == "video/mp4")
    #expect(manifest.etag == "\"golden-etag-1\"")
    #expect(manifest.lastModified == "Wed, 21 Oct 2015 07:28:00 GMT")
    #expect(manifest.createdAt == Date(timeIntervalSince1970: 1_700_000_000.123))
    #expect(manifest.isPinned)
    #expect(
      manifest.userMetadata == Data([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, 0x67, 0x6F, 0x6C, 0x64, 0x65, 0x6E]))
    #expect(manifest.versionTag == 0x600D_F00D)
    // The short last chunk and the cached share follow from the fields.
    #expect(manifest.byteRange(ofChunk: 9) == 9_437_184..<10_000_000)
    #expect(manifest.cachedBytes == 4 * 1_048_576 + 562_816)
    #expect(!manifest.isComplete)

    // Re-encoding gives the committed bytes exactly.
    #expect(try ManifestCodec.encode(manifest) == bytes)
  }

  @Test func goldenFixtureBytesFollowTheLayout() throws {
    let bytes = Array(try Data(contentsOf: Self.goldenURL))
    func le<T: FixedWidthInteger>(_ offset: Int, as type: T.Type) -> T {
      (0..<MemoryLayout<T>.size).reduce(T(0)) { $0 | T(bytes[offset + $1]) << ($1 * 8) }
    }
    // Header, 3 runs, 5 CRCs, content type (1+9), ETag (2+15), Last-Modified (1+29), metadata (4+12), CRC.
    #expect(bytes.count == 72 + 3 * 8 + 5 * 4 + 10 + 17 + 30 + 16 + 4)
    #expect(Array(bytes[0..<6]) == [0x4D, 0x43, 0x4D, 0x46, 1, 0])
    #expect(le(HeaderOffset.flags, as: UInt16.self) == 0b11)
    let idHex = bytes[HeaderOffset.objectID..<HeaderOffset.contentLength].map { String(format: "%02x", $0) }
      .joined()
    #expect(idHex == "e4ff7f05b9bb9e30f2be72cd625ab83ef6c320f14734ed233c6fa41bdeb74f93")
    #expect(le(HeaderOffset.contentLength, as: UInt64.self) == 10_000_000)
    #expect(le(HeaderOffset.chunkSize, as: UInt32.self) == 1 << 20)
    #expect(le(HeaderOffset.createdAt, as: UInt64.self) == 1_700_000_000_123)
    #expect(le(HeaderOffset.runCount, as: UInt32.self) == 3)
    #expect(le(HeaderOffset.presentCount, as: UInt32.self) == 5)
    let runs = (0..<3).map {
      (
        le(HeaderOffset.firstRun + $0 * 8, as: UInt32.self),
        le(HeaderOffset.firstRun + $0 * 8 + 4, as: UInt32.self)
      )
    }
    #expect(runs.map { [$0.0, $0.1] } == [[0, 3], [5, 1], [9, 1]])
    #expect(le(bytes.count - 4, as: UInt32.self) == CRC32.checksum(bytes.dropLast(4)))
  }
}
