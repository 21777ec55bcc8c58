import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

@testable import cache_fsck

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Every regular file under `root`, as paths relative to it, sorted.
func allFiles(under root: String) throws -> [String] {
  try snapshot(root).filter { $0.value.hasPrefix("file") }.keys.sorted()
}

/// Every entry under `root` (relative path → type, mode, size, content CRC and modification time in
/// nanoseconds), to show that a run changed nothing.
func snapshot(_ root: String) throws -> [String: String] {
  var result: [String: String] = [:]
  func walk(_ relative: String) throws {
    let path = relative.isEmpty ? root : "\(root)/\(relative)"
    var info = stat()
    guard lstat(path, &info) == 0 else { throw CocoaError(.fileReadNoSuchFile) }
    #if canImport(Darwin)
      let modified = Int64(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(info.st_mtimespec.tv_nsec)
    #else
      let modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    #endif
    let mode = String(info.st_mode & 0o7777, radix: 8)
    switch info.st_mode & S_IFMT {
    case S_IFDIR:
      if !relative.isEmpty { result[relative] = "dir mode \(mode) mtime \(modified)" }
      for name in try FileManager.default.contentsOfDirectory(atPath: path) {
        try walk(relative.isEmpty ? name : "\(relative)/\(name)")
      }
    case S_IFREG:
      let crc = CRC32.checksum(try Data(contentsOf: URL(fileURLWithPath: path)))
      result[relative] = "file mode \(mode) size \(info.st_size) crc \(crc) mtime \(modified)"
    default:
      result[relative] = "other mode \(mode) mtime \(modified)"
    }
  }
  try walk("")
  return result
}

/// Writes `count` one-chunk objects (chunk size 4096) straight to a new cache at `root`, without the data
/// manager, so a big tree is quick to make. Objects whose id starts with a byte below 8 (about 3 %) get a
/// flipped byte, so a check reports them as `chunk-crc`. Returns every id and the corrupt ones.
func makeLargeTree(at root: String, objects count: Int) throws -> (ids: [ObjectID], corrupt: Set<ObjectID>) {
  let store = try ShardedStore(root: root, chunkSize: 4096, durability: .relaxed)
  var ids: [ObjectID] = []
  var corrupt: Set<ObjectID> = []
  let base = randomBytes(count: 4096, seed: 77)
  for index in 0..<count {
    let id = ObjectID(CacheKey("https://sigint.example/object/\(index)"))
    var bytes = [UInt8](base)
    withUnsafeBytes(of: UInt64(index).littleEndian) { bytes.replaceSubrange(0..<8, with: $0) }
    var manifest = Manifest(
      objectID: id, chunkSize: 4096, contentLength: 4096,
      createdAt: Date(timeIntervalSince1970: 1_700_000_000))
    manifest.setChunk(0, crc: CRC32.checksum(bytes))
    if id.bytes[0] < 8 {
      bytes[100] ^= 0x01
      corrupt.insert(id)
    }
    let paths = store.paths(for: id)
    _ = mkdir(paths.outerShard, 0o700)
    _ = mkdir(paths.directory, 0o700)
    try writeWholeFile(paths.data, bytes)
    try writeWholeFile(paths.manifest, Array(ManifestCodec.encode(manifest)))
    ids.append(id)
  }
  return (ids, corrupt)
}

/// Writes a file with plain system calls (quicker than `Data.write` for thousands of small files).
private func writeWholeFile(_ path: String, _ bytes: [UInt8]) throws {
  let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
  guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
  defer { close(descriptor) }
  let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
  guard written == bytes.count else { throw POSIXError(.EIO) }
}

/// Removes a big tree quickly. Blocks its thread (for cleanup in a `defer`, which cannot await).
func removeTree(_ path: String) {
  _ = try? runOnThisThread("/bin/rm", ["-rf", path])
}
