import Foundation
import MediaCache

/// One finding a person expects `cache-fsck --json` to report: the library's `CheckFinding.Identity`, the
/// fields the tests compare, encoded as cache-fsck encodes them.
typealias ExpectedFinding = CheckFinding.Identity

extension CheckFinding.Identity {
  /// The same finding after a repair that fixed it (a warning is never acted on).
  func repaired(at newPath: String? = nil) -> ExpectedFinding {
    var copy = self
    copy.action = severity == .error ? .repaired : .none
    if let newPath { copy.path = newPath }
    return copy
  }
}

/// Object counts a person expects once the tree is repaired: the keys of `CheckTotals` a person can count by hand
/// (a test decodes the real `CheckTotals` and compares these four).
struct ExpectedTotals: Codable, Hashable {
  var objects: Int
  var complete: Int
  var partial: Int
  var pinned: Int
}

/// One run of `cache-fsck`.
struct ExpectedRun: Codable {
  var exitCode: Int32
  var findings: [ExpectedFinding]
  var totals: ExpectedTotals?
}

/// `expected.json` of one case.
struct Expected: Codable {
  var name: String
  var exercises: String
  /// Files whose name contains this are aged by the tests (mtime two hours in the past) after copying.
  var agedNameMarker: String
  var check: ExpectedRun
  var repair: ExpectedRun
  var recheck: ExpectedRun
  /// Files a repair must leave byte-identical (healthy objects, unknown files, young staging files).
  var untouchedByRepair: [String]
}

/// Shorthand for authoring findings.
func finding(
  _ path: String, _ kind: CheckFinding.Kind, _ severity: CheckFinding.Severity = .error, chunk: Int? = nil,
  action: CheckFinding.Action = .none
) -> ExpectedFinding {
  ExpectedFinding(path: path, kind: kind, severity: severity, chunk: chunk, action: action)
}

/// What a case builder returns: the expectations written by hand for the tree it built.
struct Expectations {
  var check: ExpectedRun
  var repair: ExpectedRun
  var recheck: ExpectedRun
  var untouched: [String]
}

/// Deterministic bytes (xorshift32): the same seed always gives the same content.
func content(_ count: Int, seed: UInt32) -> [UInt8] {
  var state = seed == 0 ? 0x9E37_79B9 : seed
  var bytes = [UInt8](repeating: 0, count: count)
  for index in 0..<count {
    state ^= state << 13
    state ^= state >> 17
    state ^= state << 5
    bytes[index] = UInt8(truncatingIfNeeded: state >> 7)
  }
  return bytes
}

/// FNV-1a of a string: a stable seed per key.
func fnv1a(_ text: String) -> UInt32 {
  var hash: UInt32 = 0x811C_9DC5
  for byte in text.utf8 {
    hash ^= UInt32(byte)
    hash = hash &* 0x0100_0193
  }
  return hash
}

/// A fixed creation time: regenerating must give the same bytes.
let fixedCreatedAt = Date(timeIntervalSince1970: 1_700_000_000.250)
let fixtureChunkSize = 4096

/// One object as it is about to be written: its bytes and manifest bytes, and where they go (relative paths).
/// A case mutates these to plant its fault before `CaseTree.put` writes them.
struct FixtureObject {
  let key: String
  let id: ObjectID
  /// The manifest as built (before any planted fault).
  var manifest: Manifest
  var data: [UInt8]
  var manifestBytes: [UInt8]
  /// Where the object's files belong.
  let rightDataPath: String
  let rightManifestPath: String
  /// Where they are written (a misplaced case changes these).
  var dataPath: String
  var manifestPath: String

  /// Flips bits of one byte of the data file.
  mutating func flipDataByte(at offset: Int, mask: UInt8 = 0x01) { data[offset] ^= mask }

  /// Re-encodes the manifest's trailing CRC over the bytes before it (after a planted field change).
  mutating func resealManifest() {
    let body = manifestBytes.dropLast(4)
    let crc = CRC32.checksum(Array(body))
    manifestBytes = Array(body) + withUnsafeBytes(of: crc.littleEndian) { Array($0) }
  }
}

/// A case's tree being built under `root`.
final class CaseTree {
  let root: String
  let store: ShardedStore

  init(root: String) throws {
    self.root = root
    // The library lays out the root (FORMAT, objects/, tmp/) and names every object's paths.
    store = try ShardedStore(root: root, chunkSize: fixtureChunkSize, durability: .relaxed)
  }

  func relative(_ absolute: String) -> String {
    precondition(absolute.hasPrefix(root + "/"))
    return String(absolute.dropFirst(root.count + 1))
  }

  /// Builds an object of `key`: `length` bytes (nil: unknown, the data file then holds `dataLength` bytes),
  /// chunks `present` listed with the CRCs of their bytes. Bytes of chunks not listed are zero unless
  /// `unlistedSeed` gives them other (unverified) content.
  func object(
    _ key: String, length: Int?, dataLength: Int? = nil, present: [Int]? = nil, seed: UInt32? = nil,
    pinned: Bool = false, unlistedSeed: UInt32? = nil, contentType: String? = "video/mp4",
    etag: String? = nil, lastModified: String? = nil, userMetadata: [UInt8] = [], versionTag: UInt32 = 0,
    storedHeaders: StoredHeaders? = nil
  ) throws -> FixtureObject {
    let id = ObjectID(CacheKey(key))
    let size = length ?? dataLength!
    let chunkCount = (size + fixtureChunkSize - 1) / fixtureChunkSize
    let listed = present ?? Array(0..<chunkCount)
    var manifest = Manifest(
      objectID: id, chunkSize: fixtureChunkSize, contentLength: length.map(Int64.init),
      createdAt: fixedCreatedAt, contentType: contentType, etag: etag, lastModified: lastModified,
      isPinned: pinned, userMetadata: Data(userMetadata))
    manifest.versionTag = versionTag
    manifest.storedHeaders = storedHeaders
    let full = content(size, seed: seed ?? fnv1a(key))
    let other = unlistedSeed.map { content(size, seed: $0) } ?? [UInt8](repeating: 0, count: size)
    var data = [UInt8](repeating: 0, count: size)
    for index in 0..<chunkCount {
      let range = (index * fixtureChunkSize)..<min(size, (index + 1) * fixtureChunkSize)
      if listed.contains(index) {
        data.replaceSubrange(range, with: full[range])
        manifest.setChunk(index, crc: CRC32.checksum(Array(full[range])))
      } else {
        data.replaceSubrange(range, with: other[range])
      }
    }
    let paths = store.paths(for: id)
    return FixtureObject(
      key: key, id: id, manifest: manifest, data: data,
      manifestBytes: Array(try ManifestCodec.encode(manifest)),
      rightDataPath: relative(paths.data), rightManifestPath: relative(paths.manifest),
      dataPath: relative(paths.data), manifestPath: relative(paths.manifest))
  }

  /// Writes an object's files (either may be left out).
  func put(_ object: FixtureObject, data: Bool = true, manifest: Bool = true) throws {
    if data { try write(object.dataPath, object.data) }
    if manifest { try write(object.manifestPath, object.manifestBytes) }
  }

  /// Writes a whole file (no holes: git would not keep them), creating its directories.
  func write(_ relativePath: String, _ bytes: [UInt8]) throws {
    let path = "\(root)/\(relativePath)"
    try FileManager.default.createDirectory(
      atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(bytes).write(to: URL(fileURLWithPath: path))
  }

  func write(_ relativePath: String, _ text: String) throws { try write(relativePath, Array(text.utf8)) }

  func remove(_ relativePath: String) throws {
    try FileManager.default.removeItem(atPath: "\(root)/\(relativePath)")
  }

  /// A shard pair that is not `id`'s own.
  func wrongShard(for id: ObjectID) -> String {
    id.shardComponents.0 == "ff" ? "00/00" : "ff/ff"
  }
}
