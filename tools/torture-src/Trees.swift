import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One object written into a trial's tree before the fault, with what it holds.
struct PlacedObject {
  var object: OriginObject
  var chunkSize: Int
  /// The chunks its manifest lists after writing.
  var listed: Set<Int>
  var pinned: Bool

  var chunkCount: Int { (object.size + chunkSize - 1) / chunkSize }

  func range(ofChunk index: Int) -> Range<Int64> {
    Int64(index * chunkSize)..<Int64(min(object.size, (index + 1) * chunkSize))
  }
}

/// Writes `object` through the library (a writable data manager, relaxed durability): its length, the origin's
/// validators, the bytes of `chunks` (nil: all), and the pin flag.
func writeObject(root: String, _ object: OriginObject, chunkSize: Int, chunks: [Int]?, pinned: Bool) throws
  -> PlacedObject
{
  let store = try ShardedStore(root: root, chunkSize: chunkSize, durability: .relaxed)
  let manager = try FileHandleAssetDataManager(store: store, id: object.id)
  var placed = PlacedObject(object: object, chunkSize: chunkSize, listed: [], pinned: pinned)
  try manager.setContentLength(Int64(object.size))
  try manager.setValidators(
    etag: TestOrigin.etag(name: object.name, version: object.version),
    lastModified: TestOrigin.lastModified(version: object.version))
  try manager.setContentType("application/octet-stream")
  for index in chunks ?? Array(0..<placed.chunkCount) {
    let range = placed.range(ofChunk: index)
    try manager.write(object.bytes(range), at: range.lowerBound)
    placed.listed.insert(index)
  }
  if pinned { try manager.setPinned(true) }
  try manager.close()
  return placed
}

/// A tree of `count` objects of random sizes; about a third partly cached, `pinnedShare` of them pinned.
/// Each object's recency stamp is set to a random time within the last `days` days.
func writeTree(
  root: String, origin: TestOrigin, count: Int, prefix: String, chunkSize: Int, pinnedShare: Double,
  days: Double, random: inout SeededRandom
) throws -> [PlacedObject] {
  var placed: [PlacedObject] = []
  for index in 0..<count {
    let size = Int.random(in: 40_000...1_500_000, using: &random)
    let name = "\(prefix)-\(index)-\(random.token())"
    let object = OriginObject(name: name, size: size, url: origin.url(.normal, name, size: size))
    let chunkCount = (size + chunkSize - 1) / chunkSize
    var chunks: [Int]?
    if random.seconds(0...1) < 0.33 {
      chunks = (0..<chunkCount).filter { _ in Bool.random(using: &random) }
      if chunks!.isEmpty { chunks = [0] }
    }
    let pinned = random.seconds(0...1) < pinnedShare && size < 400_000
    var item = try writeObject(root: root, object, chunkSize: chunkSize, chunks: chunks, pinned: pinned)
    item.pinned = pinned
    setModificationTime(objectPaths(root, object.id).manifest, now() - random.seconds(0...(days * 86_400)))
    placed.append(item)
  }
  return placed
}

// MARK: Damage

/// Flips one byte inside chunk `index` of the object's data file.
func corruptChunk(root: String, _ item: PlacedObject, _ index: Int, random: inout SeededRandom) throws {
  let range = item.range(ofChunk: index)
  let offset = Int64.random(in: range, using: &random)
  let path = objectPaths(root, item.object.id).data
  guard let byte = readBytes(path, at: offset, count: 1), byte.count == 1 else {
    throw TortureError("cannot read \(path) at \(offset)")
  }
  let descriptor = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
  guard descriptor >= 0 else { throw TortureError("cannot open \(path): \(errnoText())") }
  defer { close(descriptor) }
  var flipped = byte[0] ^ UInt8(1 << Int.random(in: 0...7, using: &random))
  guard pwrite(descriptor, &flipped, 1, off_t(offset)) == 1 else {
    throw TortureError("cannot write \(path): \(errnoText())")
  }
}

/// Flips one byte of the object's manifest past the magic and version (a manifest CRC mismatch).
func corruptManifest(root: String, _ item: PlacedObject, random: inout SeededRandom) throws {
  let path = objectPaths(root, item.object.id).manifest
  guard var bytes = readWholeFile(path), bytes.count > 16 else { throw TortureError("cannot read \(path)") }
  let offset = Int.random(in: 8..<(bytes.count - 4), using: &random)
  bytes[offset] ^= 0x5A
  try writeWholeFile(path, bytes)
}

/// A staging file left in `tmp/` by a writer that died, `age` seconds old.
func leaveStaleTemporaryFile(root: String, age: Double, random: inout SeededRandom) throws {
  let hex = (0..<4).map { _ in random.token(16) }.joined()
  let path = "\(root)/tmp/\(hex).\(Int.random(in: 100...99_999, using: &random)).\(random.next()).manifest"
  try writeWholeFile(path, Array(repeating: 0x4D, count: Int.random(in: 0...200, using: &random)))
  setModificationTime(path, now() - age)
}

/// Bytes on disk as the compactor counts them: allocated data blocks plus manifest sizes, over the tree.
func treeBytes(root: String) -> (total: Int64, objects: Set<String>) {
  var total: Int64 = 0
  var names = Set<String>()
  let objects = "\(root)/objects"
  for outer in (try? FileManager.default.contentsOfDirectory(atPath: objects)) ?? [] {
    for inner in (try? FileManager.default.contentsOfDirectory(atPath: "\(objects)/\(outer)")) ?? [] {
      let directory = "\(objects)/\(outer)/\(inner)"
      for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
        var info = stat()
        guard lstat("\(directory)/\(name)", &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
        if name.hasSuffix(".data") {
          total += Int64(info.st_blocks) * 512
        } else if name.hasSuffix(".manifest") {
          total += Int64(info.st_size)
        }
        names.insert(String(name.prefix(64)))
      }
    }
  }
  return (total, names)
}

func fileExists(_ path: String) -> Bool {
  var info = stat()
  return lstat(path, &info) == 0
}
