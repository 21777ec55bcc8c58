import Foundation
import Synchronization

/// Checks a cache tree and, asked to, repairs it without throwing good data away: the engine behind
/// `cache-fsck`, modelled on e2fsck and `git fsck`.
///
/// A check never writes (not even recency stamps). Objects in use by another process are skipped (their
/// metadata is still checked; their chunks are not read, so chunks being written are never reported as
/// corrupt). While an object is verified the checker holds its in-use lock exclusively, so no writer starts
/// under it. Unknown files are reported and never deleted.
public struct CacheChecker: Sendable {
  /// What to do.
  public struct Options: Sendable {
    /// Fix what can be fixed.
    public var repair = false
    /// Check metadata only; do not read chunk data.
    public var fast = false
    /// Files in `tmp/` younger than this many seconds belong to live writers (default 1 hour).
    public var tmpGracePeriod: Double = 3600

    public init(repair: Bool = false, fast: Bool = false, tmpGracePeriod: Double = 3600) {
      self.repair = repair
      self.fast = fast
      self.tmpGracePeriod = tmpGracePeriod
    }
  }

  /// Progress, reported after each object.
  public struct Progress: Sendable {
    public var objectsChecked: Int
    public var objectsTotal: Int
    public var bytesVerified: Int64
  }

  /// Why a check could not run at all (exit status 8).
  public enum OperationalError: Error, Sendable, CustomStringConvertible {
    case cannotRead(path: String, reason: String)
    case unsupportedFormat(path: String, found: String)

    public var description: String {
      switch self {
      case .cannotRead(let path, let reason): "cannot read \(path): \(reason)"
      case .unsupportedFormat(let path, let found):
        "\(path)/FORMAT says '\(found)'; this build reads major version \(CacheFormat.major) only; nothing checked"
      }
    }
  }

  public let root: String
  public let options: Options
  let store: ShardedStore
  /// The shard directory last read from, kept open (objects are checked in id order, shard by shard).
  let directories = DirectoryCache()

  /// One open directory descriptor, replaced when another directory is asked for.
  final class DirectoryCache: Sendable {
    private let current = Mutex<(path: String, fd: Int32)?>(nil)

    func descriptor(for path: String) throws -> Int32 {
      try current.withLock { current in
        if let current, current.path == path { return current.fd }
        if let old = current { FileSystemCalls.closeDescriptor(old.fd) }
        current = nil
        let fd = try FileSystemCalls.openDirectory(path)
        current = (path, fd)
        return fd
      }
    }

    func closeAll() {
      current.withLock { current in
        if let old = current { FileSystemCalls.closeDescriptor(old.fd) }
        current = nil
      }
    }

    deinit { closeAll() }
  }

  public init(root: String, options: Options = Options()) {
    var cleaned = root
    while cleaned.count > 1 && cleaned.hasSuffix("/") { cleaned.removeLast() }
    self.root = cleaned
    self.options = options
    self.store = ShardedStore(unvalidatedRoot: cleaned)
  }

  /// Where each file of one object was found (paths relative to the root).
  struct ObjectFiles {
    var data: String?
    var manifest: String?
    /// Status of the data file from the directory walk (same inode after a move).
    var dataStatus: FileStatus?
  }

  /// Runs the check. `isCancelled` is polled between objects; `progress` is called after each object.
  public func run(
    now: Double = Date().timeIntervalSince1970, isCancelled: @Sendable () -> Bool = { false },
    progress: (Progress) -> Void = { _ in }
  ) throws(OperationalError) -> CheckReport {
    var report = CheckReport()
    let rootInfo: FileStatus?
    do { rootInfo = try FileSystemCalls.status(root, followingSymlink: true) } catch {
      throw .cannotRead(path: root, reason: "\(error)")
    }
    guard let rootInfo else { throw .cannotRead(path: root, reason: "no such directory") }
    guard rootInfo.isDirectory else { throw .cannotRead(path: root, reason: "not a directory") }
    guard let rootEntries = try? FileSystemCalls.scanDirectory(root) else {
      throw .cannotRead(path: root, reason: "cannot list the directory")
    }
    try checkMarker(rootEntries, &report)
    for entry in rootEntries.sorted(by: { $0.name < $1.name }) {
      switch entry.name {
      case let name where (name == "objects" || name == "tmp") && !entry.status.isDirectory:
        report.findings.append(
          wrongType(entry.name, expected: "directory", consequence: "nothing can be written to the cache"))
      case CacheFormat.fileName, "objects", "tmp", Compactor.scrubCursorName: continue
      case let name where name.hasPrefix(".FORMAT."):
        checkStaleFile(name, entry.status, now: now, &report)
      default:
        report.findings.append(
          CheckFinding(
            path: entry.name, kind: .unknownEntry, severity: .warning,
            message:
              "unknown \(entry.status.isDirectory ? "directory" : "file") in the cache root; left alone"))
      }
    }
    var objects = collectObjects(&report)
    checkTemporaryFiles(now: now, &report)
    defer { directories.closeAll() }
    let ids = objects.keys.sorted()
    for (index, id) in ids.enumerated() {
      if isCancelled() {
        report.cancelled = true
        break
      }
      checkObject(id, files: &objects[id]!, &report)
      progress(
        Progress(
          objectsChecked: index + 1, objectsTotal: ids.count, bytesVerified: report.totals.bytesVerified))
    }
    return report
  }

  // MARK: Root

  private func checkMarker(_ entries: [(name: String, status: FileStatus)], _ report: inout CheckReport)
    throws(OperationalError)
  {
    let expected = CacheFormat.markerText.trimmingCharacters(in: .newlines)
    guard entries.contains(where: { $0.name == CacheFormat.fileName }) else {
      var finding = CheckFinding(
        path: CacheFormat.fileName, kind: .missingFormatMarker, severity: .error,
        message: "the FORMAT marker is missing", expected: expected, found: "no file")
      if options.repair { finding.action = writeMarker() }
      report.findings.append(finding)
      return
    }
    let text = (try? String(contentsOfFile: "\(root)/\(CacheFormat.fileName)", encoding: .utf8)) ?? ""
    if let version = CacheFormat.parse(text) {
      if version.major != CacheFormat.major {
        throw .unsupportedFormat(path: root, found: text.trimmingCharacters(in: .newlines))
      }
      return
    }
    var finding = CheckFinding(
      path: CacheFormat.fileName, kind: .badFormatMarker, severity: .error,
      message: "the FORMAT marker cannot be parsed", expected: expected,
      found: String(text.prefix(40)).trimmingCharacters(in: .newlines))
    if options.repair { finding.action = writeMarker() }
    report.findings.append(finding)
  }

  private func writeMarker() -> CheckFinding.Action {
    let staging = "\(root)/.FORMAT.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
    do {
      let file = try SystemFile(path: staging, writable: true, create: true)
      try Array(CacheFormat.markerText.utf8).withUnsafeBytes { try file.write($0, at: 0) }
      try file.sync()
      file.close()
      try FileSystemCalls.renameFile(staging, to: "\(root)/\(CacheFormat.fileName)")
      return .repaired
    } catch {
      _ = try? FileSystemCalls.unlinkFile(staging)
      return .failed
    }
  }

  // MARK: Tree walk

  /// Walks `objects/`, reporting names that are not objects and files stored under the wrong shard.
  func collectObjects(_ report: inout CheckReport) -> [ObjectID: ObjectFiles] {
    var objects: [ObjectID: ObjectFiles] = [:]
    let objectsDirectory = "\(root)/objects"
    // Directories and manifests need only their type here (a manifest's size comes from reading it); data
    // files are stat'ed for their length and allocated blocks.
    let onlyData: (UnsafePointer<CChar>) -> Bool = { name in
      let length = strlen(name)
      return length >= 5 && strcmp(name + length - 5, ".data") == 0
    }
    for outer in (try? FileSystemCalls.scanDirectory(objectsDirectory, statWhen: { _ in false })) ?? [] {
      let outerRelative = "objects/\(outer.name)"
      let outerValid = ShardedStore.isShardName(outer.name)
      guard outer.status.isDirectory else {
        report.findings.append(
          outerValid
            ? wrongType(
              outerRelative, expected: "directory", consequence: "objects of this shard cannot be used")
            : CheckFinding(
              path: outerRelative, kind: .unknownEntry, severity: .warning,
              message: "unknown file in objects/; left alone"))
        continue
      }
      if !outerValid {
        report.findings.append(
          CheckFinding(
            path: outerRelative, kind: .badShardName, severity: .warning,
            message: "shard directory name is not two lowercase hex digits", expected: "two hex digits",
            found: outer.name))
      }
      for inner in (try? FileSystemCalls.scanDirectory("\(root)/\(outerRelative)", statWhen: onlyData)) ?? []
      {
        let innerRelative = "\(outerRelative)/\(inner.name)"
        guard inner.status.isDirectory else {
          if outerValid && ShardedStore.isShardName(inner.name) {
            report.findings.append(
              wrongType(
                innerRelative, expected: "directory", consequence: "objects of this shard cannot be used"))
          } else {
            collectFile(inner.name, directory: outerRelative, status: inner.status, into: &objects, &report)
          }
          continue
        }
        if outerValid && !ShardedStore.isShardName(inner.name) {
          report.findings.append(
            CheckFinding(
              path: innerRelative, kind: .badShardName, severity: .warning,
              message: "shard directory name is not two lowercase hex digits", expected: "two hex digits",
              found: inner.name))
        }
        for entry in (try? FileSystemCalls.scanDirectory("\(root)/\(innerRelative)", statWhen: onlyData))
          ?? []
        {
          collectFile(entry.name, directory: innerRelative, status: entry.status, into: &objects, &report)
        }
      }
    }
    return objects
  }

  private func collectFile(
    _ name: String, directory: String, status: FileStatus, into objects: inout [ObjectID: ObjectFiles],
    _ report: inout CheckReport
  ) {
    let relative = "\(directory)/\(name)"
    let isData = name.hasSuffix(".data")
    let isManifest = name.hasSuffix(".manifest")
    if !status.isRegular, isData || isManifest, name.utf8.count == 64 + (isData ? 5 : 9),
      ObjectID(hex: name.prefix(64)) != nil
    {
      report.findings.append(
        wrongType(relative, expected: "regular file", consequence: "the object cannot be used"))
      return
    }
    guard status.isRegular, isData || isManifest, name.utf8.count == 64 + (isData ? 5 : 9),
      let id = ObjectID(hex: name.prefix(64))
    else {
      report.findings.append(
        CheckFinding(
          path: relative, kind: .unknownEntry, severity: .warning, message: "not a cache object; left alone"))
      return
    }
    if isData {
      objects[id, default: ObjectFiles()].data = relative
      objects[id]!.dataStatus = status
    } else {
      objects[id, default: ObjectFiles()].manifest = relative
    }
  }

  /// A finding for an entry of the wrong type where the layout has a directory or a regular file.
  func wrongType(_ relative: String, expected: String, consequence: String) -> CheckFinding {
    let found = ((try? FileSystemCalls.fileType("\(root)/\(relative)")) ?? nil)?.rawValue ?? "file"
    return CheckFinding(
      path: relative, kind: .wrongType, severity: .error,
      message:
        "a \(found) where the cache keeps a \(expected); \(consequence) (never followed or deleted: remove it)",
      expected: expected, found: found)
  }

  // MARK: tmp/

  private func checkTemporaryFiles(now: Double, _ report: inout CheckReport) {
    for entry in ((try? FileSystemCalls.scanDirectory("\(root)/tmp")) ?? []).sorted(by: { $0.name < $1.name })
    {
      guard entry.status.isRegular else {
        report.findings.append(
          CheckFinding(
            path: "tmp/\(entry.name)", kind: .unknownEntry, severity: .warning,
            message: "not a staging file; left alone"))
        continue
      }
      checkStaleFile("tmp/\(entry.name)", entry.status, now: now, &report)
    }
  }

  private func checkStaleFile(
    _ relative: String, _ status: FileStatus, now: Double, _ report: inout CheckReport
  ) {
    let age = now - status.modified
    guard age > options.tmpGracePeriod else { return }
    var finding = CheckFinding(
      path: relative, kind: .staleTemporaryFile, severity: .error,
      message: "staging file left by a writer that did not finish",
      expected: "younger than \(Int(options.tmpGracePeriod)) s", found: "\(Int(age)) s old")
    if options.repair {
      finding.action = (try? FileSystemCalls.unlinkFile("\(root)/\(relative)")) != nil ? .repaired : .failed
    }
    report.findings.append(finding)
  }
}
