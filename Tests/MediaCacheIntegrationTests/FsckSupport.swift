import Foundation
import MediaCache
import Testing

@testable import cache_fsck

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `Fixtures/caches` in the source tree.
let cacheFixturesDirectory = URL(fileURLWithPath: #filePath)
  .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
  .appendingPathComponent("Fixtures/caches").path

/// The names of the fixture cases (the directories of `Fixtures/caches`), sorted.
let cacheFixtureNames: [String] = {
  let names = (try? FileManager.default.contentsOfDirectory(atPath: cacheFixturesDirectory)) ?? []
  return names.filter { name in
    var isDirectory: ObjCBool = false
    return FileManager.default.fileExists(
      atPath: "\(cacheFixturesDirectory)/\(name)", isDirectory: &isDirectory)
      && isDirectory.boolValue
  }.sorted()
}()

/// One finding as the tests compare it (what `expected.json` holds and what `cache-fsck --json` prints, minus
/// the message and the expected/found texts): the library's type, which the fixture generator writes too.
typealias FsckFinding = CheckFinding.Identity

/// Object counts, from `expected.json` or from the `totals` of `cache-fsck --json`.
struct FsckTotals: Codable, Hashable {
  var objects: Int
  var complete: Int
  var partial: Int
  var pinned: Int
}

/// One expected run of `cache-fsck`.
struct ExpectedFsckRun: Codable {
  var exitCode: Int32
  var findings: [FsckFinding]
  var totals: FsckTotals?
}

/// A fixture's `expected.json`.
struct FixtureExpectation: Codable {
  var name: String
  var exercises: String
  var agedNameMarker: String
  var check: ExpectedFsckRun
  var repair: ExpectedFsckRun
  var recheck: ExpectedFsckRun
  var untouchedByRepair: [String]

  init(fixture name: String) throws {
    let url = URL(fileURLWithPath: "\(cacheFixturesDirectory)/\(name)/expected.json")
    self = try ReportJSON.decode(FixtureExpectation.self, from: Data(contentsOf: url))
  }
}

/// What `cache-fsck --json` printed, decoded into the types cache-fsck encodes: its report (`FsckOutput`), or
/// the failure object it prints when the check cannot run (`FsckFailure`).
struct FsckReport {
  var status: Int32
  var output: FsckOutput?
  var failure: FsckFailure?
  var raw: String

  init(_ result: CommandResult) throws {
    status = result.status
    raw = result.text + result.stderr
    do {
      output = try ReportJSON.decode(FsckOutput.self, from: result.stdout)
    } catch {
      failure = try #require(
        try? ReportJSON.decode(FsckFailure.self, from: result.stdout),
        "cache-fsck printed neither a report (\(error)) nor a failure: \(raw)")
    }
  }

  /// The `exitCode` of either object.
  var exitCodeField: Int32? { output?.exitCode ?? failure?.exitCode }
  var findings: [FsckFinding] { output?.report.findings.map(\.identity) ?? [] }
  /// The totals (nil when cache-fsck printed a failure).
  var totals: CheckTotals? { output?.report.totals }

  var objectTotals: FsckTotals? {
    totals.map {
      FsckTotals(objects: $0.objects, complete: $0.complete, partial: $0.partial, pinned: $0.pinned)
    }
  }
}

/// Runs the real `cache-fsck` with `arguments`.
func fsck(_ arguments: [String]) throws -> CommandResult { try run(binary("cache-fsck"), arguments) }

/// Runs `cache-fsck … --json` and parses what it printed.
func fsckJSON(_ arguments: [String]) throws -> FsckReport { try FsckReport(fsck(arguments + ["--json"])) }

/// Copies fixture `name` (without its `expected.json`) to `destination` as fresh files, so every file's
/// modification time is now; then ages every file whose name contains `marker` to two hours old.
func copyFixture(_ name: String, to destination: String, agingNamesContaining marker: String = "stale") throws
{
  let source = "\(cacheFixturesDirectory)/\(name)"
  try copyTree(source, destination, skippingTopLevel: ["expected.json"])
  let old = Date().addingTimeInterval(-7200)
  for path in try allFiles(under: destination) where (path as NSString).lastPathComponent.contains(marker) {
    try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: "\(destination)/\(path)")
  }
}

private func copyTree(_ source: String, _ destination: String, skippingTopLevel skipped: Set<String> = [])
  throws
{
  let manager = FileManager.default
  try manager.createDirectory(
    atPath: destination, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
  for name in try manager.contentsOfDirectory(atPath: source) where !skipped.contains(name) {
    var isDirectory: ObjCBool = false
    _ = manager.fileExists(atPath: "\(source)/\(name)", isDirectory: &isDirectory)
    if isDirectory.boolValue {
      try copyTree("\(source)/\(name)", "\(destination)/\(name)")
    } else {
      let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(source)/\(name)"))
      guard
        manager.createFile(
          atPath: "\(destination)/\(name)", contents: bytes, attributes: [.posixPermissions: 0o600])
      else { throw CocoaError(.fileWriteUnknown) }
    }
  }
}

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

/// Whether process `pid` has a handler installed for `signal` (Linux: `SigCgt` in `/proc/PID/status`). Where
/// that cannot be read, waits a moment and answers yes.
func hasSignalHandler(_ pid: Int32, _ signal: Int32) -> Bool {
  #if os(Linux)
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
      let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
      let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16)
    else { return false }
    return mask & (1 << UInt64(signal - 1)) != 0
  #else
    usleep(100_000)
    return true
  #endif
}

/// Writes `count` one-chunk objects (chunk size 4096) straight to a new cache at `root`, without the data
/// manager, so a big tree is quick to make. Objects whose id starts with a byte below 8 (about 3 %) get a
/// flipped byte, so a check reports them as `chunk-crc`. Returns every id and the corrupt ones.
func makeLargeTree(at root: String, objects count: Int) throws -> (ids: [ObjectID], corrupt: Set<ObjectID>) {
  let store = try ShardedStore(root: root, chunkSize: 4096, durability: .relaxed)
  var ids: [ObjectID] = []
  var corrupt: Set<ObjectID> = []
  let base = randomBytes(4096, seed: 77)
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

/// Bytes process `pid` has read so far (`rchar` in `/proc/PID/io` on Linux; nil where unknown).
func bytesRead(by pid: Int32) -> Int? {
  #if os(Linux)
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix("rchar:") })
    else { return nil }
    return Int(line.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces))
  #else
    return nil
  #endif
}

/// Removes a big tree quickly.
func removeTree(_ path: String) {
  _ = try? run("/bin/rm", ["-rf", path])
}
