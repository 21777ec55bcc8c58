import Foundation
import Testing

@testable import MediaCache

// MARK: Temporary directories

/// A new, empty directory under the system temporary directory.
func makeTemporaryDirectory() throws -> String {
  let url = FileManager.default.temporaryDirectory
    .appendingPathComponent("MediaCacheTests-\(UUID().uuidString)", isDirectory: true)
  try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  return url.path
}

/// Runs `body` with a fresh temporary directory and removes the directory (and everything in it) afterwards,
/// whether `body` returns or throws.
func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
  let path = try makeTemporaryDirectory()
  defer { try? FileManager.default.removeItem(atPath: path) }
  return try await body(path)
}

/// Runs `body` with a store at `<fresh temporary directory>/cache` and removes the directory afterwards.
func withStore<T>(
  chunkSize: Int = 4096, durability: Durability = .relaxed, _ body: (ShardedStore) async throws -> T
) async throws -> T {
  try await withTemporaryDirectory { directory in
    let store = try ShardedStore(root: "\(directory)/cache", chunkSize: chunkSize, durability: durability)
    return try await body(store)
  }
}

// MARK: Deterministic randomness

/// SplitMix64: a tiny, fast, seedable generator so that test data is the same on every run.
struct DeterministicRandom: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// `count` pseudo-random bytes, the same for the same seed.
func randomBytes(count: Int, seed: UInt64) -> Data {
  var rng = DeterministicRandom(seed: seed)
  var bytes = [UInt8](repeating: 0, count: count)
  var index = 0
  while index < count {
    let word = rng.next()
    for shift in stride(from: 0, to: 64, by: 8) where index < count {
      bytes[index] = UInt8(truncatingIfNeeded: word >> UInt64(shift))
      index += 1
    }
  }
  return Data(bytes)
}

// MARK: Files on disk

/// Overwrites the byte at `offset` of the file at `path` with its complement (through `FileHandle`, no append).
func flipByte(atPath path: String, offset: Int64) throws {
  let handle = try #require(FileHandle(forUpdatingAtPath: path))
  defer { try? handle.close() }
  try handle.seek(toOffset: UInt64(offset))
  let old = try #require(try handle.read(upToCount: 1)?.first)
  try handle.seek(toOffset: UInt64(offset))
  try handle.write(contentsOf: [~old])
}

/// The whole contents of the file at `path`.
func fileBytes(_ path: String) throws -> Data {
  try Data(contentsOf: URL(fileURLWithPath: path))
}

/// The permission bits of the file or directory at `path`.
func permissions(_ path: String) throws -> Int {
  let attributes = try FileManager.default.attributesOfItem(atPath: path)
  let mode = try #require(attributes[.posixPermissions] as? NSNumber)
  return mode.intValue & 0o777
}

// MARK: Manifests

/// Replaces the last four bytes of a manifest with the CRC-32 of the bytes before them, so that a mutated
/// manifest gets past the checksum and reaches the field checks.
func withRecomputedCRC(_ body: some Collection<UInt8>) -> Data {
  var bytes = Array(body)
  let crc = CRC32.checksum(bytes)
  withUnsafeBytes(of: crc.littleEndian) { bytes.append(contentsOf: $0) }
  return Data(bytes)
}

/// `manifest`'s encoding with its trailing CRC removed: the body a test mutates before `withRecomputedCRC`.
func encodedBody(_ manifest: Manifest) throws -> [UInt8] {
  Array(try ManifestCodec.encode(manifest).dropLast(4))
}

/// Byte offsets of the fixed header fields of an encoded manifest (docs/FORMAT.md).
enum HeaderOffset {
  static let major = 4
  static let minor = 5
  static let flags = 6
  static let objectID = 8
  static let contentLength = 40
  static let chunkSize = 48
  static let versionTag = 52
  static let createdAt = 56
  static let runCount = 64
  static let presentCount = 68
  static let firstRun = 72
}

/// Writes `value` little-endian at `offset` of `bytes`.
func poke<T: FixedWidthInteger>(_ value: T, at offset: Int, in bytes: inout [UInt8]) {
  withUnsafeBytes(of: value.littleEndian) { raw in
    for (index, byte) in raw.enumerated() { bytes[offset + index] = byte }
  }
}

/// A manifest with several chunk runs and every optional field set.
func richManifest(key: String = "https://example.com/rich.mp4") -> Manifest {
  var manifest = Manifest(
    objectID: ObjectID(CacheKey(key)), chunkSize: 4096, contentLength: 100_000,
    createdAt: Date(timeIntervalSince1970: 1_700_000_000.5), contentType: "video/mp4", etag: "\"abc-123\"",
    lastModified: "Tue, 14 Nov 2023 22:13:20 GMT", isPinned: true, userMetadata: Data("hello".utf8))
  for index in [0, 1, 2, 5, 9, 10, 24] {
    manifest.setChunk(index, crc: UInt32(truncatingIfNeeded: index &* 0x9E37_79B9 &+ 7))
  }
  return manifest
}

/// Asserts that `body` throws a `StoreError` for which `matches` holds, and returns it.
@discardableResult
func expectStoreError(
  _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation,
  _ matches: (StoreError) -> Bool
) -> StoreError? {
  do {
    try body()
    Issue.record("expected a StoreError, nothing was thrown", sourceLocation: sourceLocation)
  } catch let error as StoreError {
    #expect(matches(error), "unexpected \(error)", sourceLocation: sourceLocation)
    return error
  } catch {
    Issue.record("expected a StoreError, got \(error)", sourceLocation: sourceLocation)
  }
  return nil
}

/// Compares two manifests field by field, so that a failure names the field that differs.
func expectSameManifest(
  _ actual: Manifest, _ expected: Manifest, _ context: String = "",
  sourceLocation: SourceLocation = #_sourceLocation
) {
  #expect(actual.objectID == expected.objectID, "objectID \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.contentLength == expected.contentLength, "contentLength \(context)", sourceLocation: sourceLocation
  )
  #expect(actual.chunkSize == expected.chunkSize, "chunkSize \(context)", sourceLocation: sourceLocation)
  #expect(actual.chunkCRCs == expected.chunkCRCs, "chunk CRCs \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.contentType == expected.contentType, "contentType \(context)", sourceLocation: sourceLocation)
  #expect(actual.etag == expected.etag, "etag \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.lastModified == expected.lastModified, "lastModified \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.createdAt.timeIntervalSince1970 == expected.createdAt.timeIntervalSince1970,
    "createdAt \(context)", sourceLocation: sourceLocation)
  #expect(actual.isPinned == expected.isPinned, "isPinned \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.userMetadata == expected.userMetadata, "userMetadata \(context)", sourceLocation: sourceLocation)
  #expect(actual.versionTag == expected.versionTag, "versionTag \(context)", sourceLocation: sourceLocation)
}

/// The fields in which two manifests differ, each with both values, for failure messages.
func manifestDifferences(_ a: Manifest, _ b: Manifest) -> [String] {
  var result: [String] = []
  func check<T: Equatable>(_ name: String, _ x: T, _ y: T) {
    if x != y { result.append("\(name): \(x) vs \(y)") }
  }
  check("objectID", a.objectID, b.objectID)
  check("contentLength", a.contentLength, b.contentLength)
  check("chunkSize", a.chunkSize, b.chunkSize)
  check("chunkCRCs", a.chunkCRCs, b.chunkCRCs)
  check("contentType", a.contentType, b.contentType)
  check("etag", a.etag, b.etag)
  check("lastModified", a.lastModified, b.lastModified)
  check("createdAt (s since 1970)", a.createdAt.timeIntervalSince1970, b.createdAt.timeIntervalSince1970)
  check("isPinned", a.isPinned, b.isPinned)
  check("userMetadata", a.userMetadata, b.userMetadata)
  check("versionTag", a.versionTag, b.versionTag)
  return result
}
