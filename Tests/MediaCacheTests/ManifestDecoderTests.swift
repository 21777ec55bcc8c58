import Foundation
import Testing

@testable import MediaCache

/// A manifest assembled field by field from the byte layout, independently of `ManifestCodec.encode`, so that
/// a test can put any value into any field (counts that disagree with the runs, lengths that lie).
struct RawManifest {
  var magic: [UInt8] = Array("MCMF".utf8)
  var major: UInt8 = 1
  var minor: UInt8 = 0
  var flags: UInt16 = 0b10
  var id: [UInt8] = ObjectID(CacheKey("raw")).bytes
  var contentLength: UInt64 = 10 * 4096
  var chunkSize: UInt32 = 4096
  var versionTag: UInt32 = 7
  var createdMillis: UInt64 = 1_700_000_000_000
  var runs: [(start: UInt32, count: UInt32)] = [(0, 2), (5, 1)]
  /// Overrides the run count written (default: `runs.count`).
  var runCount: UInt32?
  /// Overrides the present chunk count written (default: the runs' total).
  var presentCount: UInt32?
  /// Overrides the CRCs written (default: `1, 2, 3, …`, one per present chunk).
  var crcs: [UInt32]?
  var contentType: [UInt8] = Array("video/mp4".utf8)
  var etag: [UInt8] = Array("\"e1\"".utf8)
  var etagLength: UInt16?
  var lastModified: [UInt8] = Array("Tue, 14 Nov 2023 22:13:20 GMT".utf8)
  var metadata: [UInt8] = [1, 2, 3]
  var metadataLength: UInt32?
  var trailing: [UInt8] = []

  var body: [UInt8] {
    var out: [UInt8] = []
    func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
    out += magic
    put(major)
    put(minor)
    put(flags)
    out += id
    put(contentLength)
    put(chunkSize)
    put(versionTag)
    put(createdMillis)
    let total = runs.reduce(0) { $0 + Int($1.count) }
    put(runCount ?? UInt32(runs.count))
    put(presentCount ?? UInt32(total))
    for run in runs {
      put(run.start)
      put(run.count)
    }
    for crc in crcs ?? (0..<total).map({ UInt32($0 + 1) }) { put(crc) }
    put(UInt8(truncatingIfNeeded: contentType.count))
    out += contentType
    put(etagLength ?? UInt16(etag.count))
    out += etag
    put(UInt8(truncatingIfNeeded: lastModified.count))
    out += lastModified
    put(metadataLength ?? UInt32(metadata.count))
    out += metadata
    out += trailing
    return out
  }

  /// The bytes with a correct trailing CRC.
  var bytes: Data { withRecomputedCRC(body) }
}

@Suite struct ManifestDecoderTests {
  /// Decodes `raw` and returns the error, recording an issue if it decodes.
  func decodeError(_ raw: RawManifest, expectedID: ObjectID? = nil) -> ManifestError? {
    do {
      let manifest = try ManifestCodec.decode(raw.bytes, expectedID: expectedID)
      Issue.record("decoded unexpectedly: \(manifest)")
      return nil
    } catch {
      return error
    }
  }

  func expectInvalidField(
    _ raw: RawManifest, named prefix: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    let error = decodeError(raw)
    guard case .invalidField(let name, _) = error?.kind, name.hasPrefix(prefix) else {
      Issue.record(
        "expected invalidField(\(prefix)…), got \(String(describing: error))", sourceLocation: sourceLocation)
      return
    }
  }

  @Test func theRawBuilderAgreesWithTheEncoder() throws {
    let raw = RawManifest()
    let decoded = try ManifestCodec.decode(raw.bytes, expectedID: ObjectID(CacheKey("raw")))
    #expect(decoded.contentLength == 40_960)
    #expect(decoded.presentChunks.ranges == [0..<2, 5..<6])
    #expect([0, 1, 5].map { decoded.crc(ofChunk: $0) } == [1, 2, 3])
    #expect(decoded.contentType == "video/mp4")
    #expect(decoded.etag == "\"e1\"")
    #expect(decoded.lastModified == "Tue, 14 Nov 2023 22:13:20 GMT")
    #expect(decoded.createdAt == Date(timeIntervalSince1970: 1_700_000_000))
    #expect(!decoded.isPinned)
    #expect(decoded.userMetadata == Data([1, 2, 3]))
    #expect(decoded.versionTag == 7)
    #expect(try ManifestCodec.encode(decoded) == raw.bytes)
  }

  @Test func runBeyondTheContentLength() {
    var raw = RawManifest()
    raw.runs = [(0, 2), (8, 3)]  // 10 chunks: 8..<11 reaches past the end
    expectInvalidField(raw, named: "run 1")
    raw.runs = [(10, 1)]
    expectInvalidField(raw, named: "run 0")
    raw.runs = [(8, 2)]  // exactly the last two chunks
    #expect(throws: Never.self) { try ManifestCodec.decode(raw.bytes) }
  }

  @Test(
    arguments: [
      [(0, 5), (3, 2)],  // overlapping
      [(0, 5), (5, 2)],  // touching: not canonical
      [(5, 1), (0, 1)],  // descending
      [(2, 3), (2, 3)],  // repeated
    ] as [[(UInt32, UInt32)]])
  func nonCanonicalRuns(_ runs: [(UInt32, UInt32)]) {
    var raw = RawManifest()
    raw.runs = runs.map { (start: $0.0, count: $0.1) }
    expectInvalidField(raw, named: "run 1")
  }

  @Test func emptyRun() {
    var raw = RawManifest()
    raw.runs = [(0, 2), (4, 0)]
    expectInvalidField(raw, named: "run 1")
  }

  @Test func countsThatDoNotFitTheFileAreRefusedBeforeAllocating() {
    for (runCount, presentCount) in [(UInt32.max, UInt32(3)), (2, .max), (.max, .max), (1 << 28, 1 << 28)] {
      var raw = RawManifest()
      raw.runCount = runCount
      raw.presentCount = presentCount
      guard case .truncated(let needed, let available, _) = decodeError(raw)?.kind else {
        Issue.record("counts \(runCount)/\(presentCount) not refused as truncated")
        continue
      }
      #expect(needed > available)
    }
  }

  @Test func presentCountDisagreeingWithTheRuns() {
    var raw = RawManifest()
    raw.presentCount = 2  // runs hold 3
    raw.crcs = [1, 2, 3, 0]  // enough bytes either way
    expectInvalidField(raw, named: "present chunk count")
    raw.presentCount = 11  // more chunks than a 10-chunk object has
    raw.crcs = Array(repeating: 0, count: 11)
    expectInvalidField(raw, named: "present chunk count")
  }

  @Test(arguments: [0b100, 0x8000, 0xFFFF] as [UInt16])
  func unknownFlags(_ flags: UInt16) {
    var raw = RawManifest()
    raw.flags = flags
    expectInvalidField(raw, named: "flags")
  }

  @Test(arguments: [0, 1, 4095, (64 << 20) + 1, UInt32.max] as [UInt32])
  func chunkSizeOutsideTheAllowedRange(_ chunkSize: UInt32) {
    var raw = RawManifest()
    raw.chunkSize = chunkSize
    expectInvalidField(raw, named: "chunk size")
  }

  @Test func chunkSizeBounds() throws {
    var raw = RawManifest()
    raw.chunkSize = 4096
    #expect(try ManifestCodec.decode(raw.bytes).chunkSize == 4096)
    raw.chunkSize = 64 << 20
    raw.contentLength = 640 << 20
    #expect(try ManifestCodec.decode(raw.bytes).chunkSize == 64 << 20)
  }

  @Test func contentLengthChecks() throws {
    var raw = RawManifest()
    raw.contentLength = (1 << 53) + 1
    expectInvalidField(raw, named: "content length")
    raw.flags = 0  // length unknown, but a length is given
    raw.contentLength = 5
    expectInvalidField(raw, named: "content length")
    raw.contentLength = 0
    #expect(try ManifestCodec.decode(raw.bytes).contentLength == nil)
  }

  @Test(arguments: [UInt64(bitPattern: -1), (1 << 50) + 1, 1 << 63] as [UInt64])
  func implausibleCreationTime(_ millis: UInt64) {
    var raw = RawManifest()
    raw.createdMillis = millis
    expectInvalidField(raw, named: "created time")
  }

  @Test func wrongObjectID() {
    let expected = ObjectID(CacheKey("another"))
    let error = decodeError(RawManifest(), expectedID: expected)
    #expect(error == .objectIDMismatch(expected: expected, found: ObjectID(CacheKey("raw"))))
  }

  @Test func badMagic() {
    var raw = RawManifest()
    raw.magic = Array("MCMG".utf8)
    #expect(decodeError(raw) == .badMagic(found: Array("MCMG".utf8)))
  }

  @Test func unsupportedMajorVersions() {
    for major: UInt8 in [0, 2, 255] {
      var raw = RawManifest()
      raw.major = major
      raw.minor = 3
      #expect(decodeError(raw) == .unsupportedVersion(major: major, minor: 3))
    }
  }

  @Test func trailingBytes() throws {
    var raw = RawManifest()
    raw.trailing = [0, 0, 0]
    #expect(decodeError(raw) == .trailingBytes(count: 3))
    // Version 1.1 appends the span count (and spans); bytes after them are refused as well.
    raw.minor = 1
    raw.trailing = [0, 0, 0, 0]
    let noSpans = try ManifestCodec.decode(raw.bytes)
    raw.trailing = [0, 0, 0, 0, 7]
    #expect(decodeError(raw) == .trailingBytes(count: 1))
    raw.trailing = [0, 0, 0]
    #expect(decodeError(raw) == .truncated(needed: 4, available: 3, field: "span count"))
    // Version 1.2 appends the group after the spans; bytes after it are refused as well.
    raw.minor = 2
    raw.trailing = [0, 0, 0, 0, 0]
    #expect(try ManifestCodec.decode(raw.bytes) == noSpans)
    raw.trailing = [0, 0, 0, 0, 0, 9]
    #expect(decodeError(raw) == .trailingBytes(count: 1))
    raw.trailing = [0, 0, 0, 0, 4, 0x61]
    #expect(decodeError(raw) == .truncated(needed: 4, available: 1, field: "group"))
    // Version 1.3 appends the stored headers (time, block length, block); time 0 and no block mean none, and
    // bytes after them are refused as well.
    raw.minor = 3
    let noHeaders: [UInt8] = [0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 10)
    raw.trailing = noHeaders
    #expect(try ManifestCodec.decode(raw.bytes) == noSpans)
    raw.trailing = noHeaders + [9]
    #expect(decodeError(raw) == .trailingBytes(count: 1))
    raw.trailing = [0, 0, 0, 0, 0, 9, 9, 9]
    #expect(decodeError(raw) == .truncated(needed: 8, available: 3, field: "stored headers time"))
    // A newer minor version may append fields this build skips (after 1.3's stored headers).
    raw.minor = 4
    raw.trailing = noHeaders + [9, 9, 9]
    let decoded = try ManifestCodec.decode(raw.bytes)
    raw.minor = 0
    raw.trailing = []
    #expect(decoded == (try ManifestCodec.decode(raw.bytes)))
    #expect(noSpans == decoded)
  }

  @Test func checksumMismatch() {
    var bytes = Array(RawManifest().bytes)
    bytes[HeaderOffset.objectID] ^= 0x01
    let computed = CRC32.checksum(bytes.dropLast(4))
    let stored = bytes.suffix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    #expect(throws: ManifestError.checksumMismatch(stored: stored, computed: computed)) {
      try ManifestCodec.decode(Data(bytes))
    }
  }

  @Test func stringFieldChecks() {
    var raw = RawManifest()
    raw.contentType = [0x76, 0xC3, 0x28]  // invalid UTF-8
    expectInvalidField(raw, named: "content type")
    raw = RawManifest()
    raw.etag = Array(repeating: 0x61, count: 1025)
    expectInvalidField(raw, named: "ETag")
    raw = RawManifest()
    raw.etagLength = 5000  // more than the limit and more than the bytes left
    #expect(decodeError(raw) != nil)
    raw = RawManifest()
    raw.metadataLength = 64 * 1024 + 1
    raw.metadata = Array(repeating: 0, count: 64 * 1024 + 1)
    expectInvalidField(raw, named: "user metadata")
    raw = RawManifest()
    raw.metadataLength = 100  // claims more than the 3 bytes present
    guard decodeError(raw)?.code == .truncated else {
      Issue.record("a metadata length past the end must be reported as truncated")
      return
    }
  }
}
