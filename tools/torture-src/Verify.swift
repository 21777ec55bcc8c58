import Foundation
import MediaCache
import MediaCacheTestOrigin

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One object of the origin that a trial caches: its URL (the cache key) and what its bytes are.
struct OriginObject: Sendable {
  let name: String
  let size: Int
  let url: String
  var version = 0

  var id: ObjectID { CacheKey(url).objectID }

  /// The origin's bytes `range` of this object.
  func bytes(_ range: Range<Int64>) -> [UInt8] {
    TestOrigin.bytes(
      name: name, size: size, version: version, range: Int(range.lowerBound)..<Int(range.upperBound))
  }
}

/// What the audit of one object found.
struct ObjectAudit {
  /// The committed manifest (nil: none, or it could not be decoded; see `manifestError`).
  var manifest: Manifest?
  var manifestError: String?
  /// Listed chunks whose bytes on disk match their CRC and the origin.
  var goodChunks: Set<Int> = []
  /// Listed chunks that fail their CRC (allowed only where the trial put damage).
  var badChunks: Set<Int> = []
  var bytesVerified: Int64 = 0
  /// Violations: each one a failure of the trial.
  var problems: [String] = []

  /// The byte ranges the manifest lists.
  var listedRanges: [Range<Int64>] { manifest?.presentByteRanges.ranges ?? [] }
}

/// Reads the object's committed manifest and checks every chunk it lists against its CRC and against the
/// origin's bytes, straight from the data file (no library read path, no lock). `damaged` are chunks the
/// trial corrupted on purpose: they may fail their CRC; any other chunk that does is a problem, and a chunk
/// that passes its CRC but differs from the origin is always one.
func auditObject(root: String, _ object: OriginObject, damaged: Set<Int> = []) -> ObjectAudit {
  var audit = ObjectAudit()
  let paths = objectPaths(root, object.id)
  var info = stat()
  guard lstat(paths.manifest, &info) == 0 else { return audit }
  guard (info.st_mode & S_IFMT) == S_IFREG, let bytes = readWholeFile(paths.manifest) else {
    audit.manifestError = "manifest is not a readable regular file"
    return audit
  }
  let manifest: Manifest
  do {
    manifest = try ManifestCodec.decode(Data(bytes), expectedID: object.id)
  } catch {
    audit.manifestError = "\(error)"
    return audit
  }
  audit.manifest = manifest
  if let length = manifest.contentLength, length != Int64(object.size) {
    audit.problems.append("\(object.name): manifest length \(length), origin size \(object.size)")
    return audit
  }
  for index in manifest.chunkCRCs.keys.sorted() {
    let range = manifest.byteRange(ofChunk: index)
    guard range.upperBound <= Int64(object.size) else {
      audit.problems.append(
        "\(object.name): chunk \(index) (\(range)) lies past the origin's end \(object.size)")
      continue
    }
    let onDisk = readBytes(paths.data, at: range.lowerBound, count: Int(range.count)) ?? []
    let crc = CRC32.checksum(onDisk)
    if onDisk.count != Int(range.count) || crc != manifest.crc(ofChunk: index) {
      audit.badChunks.insert(index)
      if !damaged.contains(index) {
        audit.problems.append(
          "\(object.name): listed chunk \(index) (bytes \(range)) fails its CRC "
            + "(\(onDisk.count) bytes on disk, CRC \(String(crc, radix: 16)), manifest says "
            + "\(String(manifest.crc(ofChunk: index)!, radix: 16)))")
      }
      continue
    }
    if onDisk != object.bytes(range) {
      audit.problems.append(
        "\(object.name): listed chunk \(index) (bytes \(range)) passes its CRC but differs from the origin")
      continue
    }
    audit.goodChunks.insert(index)
    audit.bytesVerified += Int64(range.count)
  }
  return audit
}

/// Checks that `output` (what `mediacache cat` printed, or an HTTP body) equals the origin's `range`.
func compare(_ output: [UInt8], _ object: OriginObject, _ range: Range<Int64>) -> String? {
  let expected = object.bytes(range)
  if output == expected { return nil }
  let first = zip(output, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
  return
    "\(object.name) bytes \(range): got \(output.count) bytes, expected \(expected.count); first difference at "
    + "\(first.map { String(Int64($0) + range.lowerBound) } ?? "the end")"
}

// MARK: cache-fsck

/// One finding of `cache-fsck --json`, with its kind, severity and action as their JSON strings (the trials
/// compare them with the kinds they planted).
struct FsckFinding: CustomStringConvertible {
  var path: String
  var kind: String
  var severity: String
  var chunk: Int?
  var action: String
  var message: String

  init(_ finding: CheckFinding) {
    path = finding.path
    kind = finding.kind.rawValue
    severity = finding.severity.rawValue
    chunk = finding.chunk
    action = finding.action.rawValue
    message = finding.message
  }

  var description: String { "\(kind) \(path)\(chunk.map { " chunk \($0)" } ?? ""): \(message) [\(action)]" }
}

/// What `cache-fsck --json` reported, decoded into the library's `CheckReport` (the keys cache-fsck adds
/// around it, root, mode, fast and exitCode, are not needed here).
struct FsckResult {
  var finished: Finished
  var findings: [FsckFinding] = []
  var bytesVerified: Int64 = 0
  var parseError: String?

  var errors: [FsckFinding] { findings.filter { $0.severity == "error" } }

  init(_ finished: Finished) {
    self.finished = finished
    let report: CheckReport
    do {
      report = try ReportJSON.decode(CheckReport.self, from: Data(finished.stdout))
    } catch {
      parseError = "cache-fsck printed no report (\(finished.summary)): \(error)"
      return
    }
    bytesVerified = report.totals.bytesVerified
    findings = report.findings.map(FsckFinding.init)
  }
}

/// Runs `cache-fsck ROOT MODE --json`.
func runFsck(_ binaries: Binaries, _ root: String, repair: Bool, log: CommandLog, timeout: Double = 300)
  throws
  -> FsckResult
{
  let arguments = [root, repair ? "--repair" : "-n", "--json"]
  return FsckResult(
    try runCommand(binaries.fsck, arguments, log: log, tag: repair ? "fsck-repair" : "fsck", timeout: timeout)
  )
}

// MARK: Security

/// What a scan of a cache tree found: files that hold a URL or key the trial used, and entries whose type or
/// mode breaks "files 0600, directories 0700".
struct SecurityScan {
  var filesScanned = 0
  var bytesScanned: Int64 = 0
  var problems: [String] = []
}

/// Walks `root` (never following a symlink) and reads every regular file whole, looking for each of `needles`
/// (URLs, keys, object names). Every regular file must be mode 0600 and every directory 0700; anything else
/// (a symlink, a FIFO) is reported unless its relative path is in `ignoring`.
func scanForSecrets(root: String, needles: [String], ignoring: Set<String> = []) -> SecurityScan {
  var scan = SecurityScan()
  let patterns = Set(needles.filter { !$0.isEmpty }).map { Array($0.utf8) }
  let overlap = (patterns.map(\.count).max() ?? 1) - 1
  func walk(_ relative: String) {
    let path = relative.isEmpty ? root : "\(root)/\(relative)"
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    let mode = info.st_mode & 0o7777
    switch info.st_mode & S_IFMT {
    case S_IFDIR:
      if mode != 0o700 && !ignoring.contains(relative) {
        scan.problems.append(
          "directory \(relative.isEmpty ? "." : relative) has mode \(String(mode, radix: 8))")
      }
      for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
        walk(relative.isEmpty ? name : "\(relative)/\(name)")
      }
    case S_IFREG:
      if ignoring.contains(relative) { return }
      if mode != 0o600 { scan.problems.append("file \(relative) has mode \(String(mode, radix: 8))") }
      scan.filesScanned += 1
      let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
      guard descriptor >= 0 else {
        scan.problems.append("file \(relative) cannot be read: \(errnoText())")
        return
      }
      defer { close(descriptor) }
      // Read in pieces, each searched with the end of the previous one in front, so a needle that straddles
      // two pieces is found.
      var carry: [UInt8] = []
      var piece = [UInt8](repeating: 0, count: 1 << 20)
      var offset: off_t = 0
      while true {
        let got = piece.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, $0.count, offset) }
        if got < 0 && errno == EINTR { continue }
        guard got > 0 else { break }
        offset += off_t(got)
        scan.bytesScanned += Int64(got)
        let window = carry + piece[..<got]
        for pattern in patterns where contains(window, pattern) {
          scan.problems.append(
            "file \(relative) contains the plain text '\(String(decoding: pattern, as: UTF8.self))'")
        }
        carry = Array(window.suffix(overlap))
      }
    default:
      if !ignoring.contains(relative) {
        scan.problems.append("\(relative) is neither a regular file nor a directory")
      }
    }
  }
  walk("")
  return scan
}

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
  guard !needle.isEmpty, haystack.count >= needle.count else { return false }
  return haystack.withUnsafeBytes { hay in
    needle.withUnsafeBytes { pin in
      let base = hay.baseAddress!
      let last = hay.count - pin.count
      var index = 0
      while index <= last {
        // memchr for the first byte, memcmp for the rest (memmem is a GNU extension Swift does not see).
        guard let found = memchr(base + index, Int32(pin[0]), last - index + 1) else { return false }
        let offset = base.distance(to: UnsafeRawPointer(found))
        if memcmp(base + offset, pin.baseAddress!, pin.count) == 0 { return true }
        index = offset + 1
      }
      return false
    }
  }
}

/// The strings a scan looks for: the URL, and its path with the query. (Not the bare object name: the test
/// origin's ETag, which the manifest keeps by design, is made from it.)
func secretNeedles(_ objects: [OriginObject]) -> [String] {
  objects.flatMap { object -> [String] in
    var needles = [object.url]
    if let slash = object.url.range(
      of: "/", range: object.url.range(of: "://")!.upperBound..<object.url.endIndex)
    {
      needles.append(String(object.url[slash.lowerBound...]))
    }
    return needles
  }
}
