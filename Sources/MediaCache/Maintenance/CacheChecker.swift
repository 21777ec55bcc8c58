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
    /// Files in `tmp/` younger than this belong to live writers (default 1 hour).
    public var tmpGracePeriod: Duration = .seconds(3600)

    /// Options for a check: read-only and full (every chunk's CRC verified) by default.
    public init(repair: Bool = false, fast: Bool = false, tmpGracePeriod: Duration = .seconds(3600)) {
      self.repair = repair
      self.fast = fast
      self.tmpGracePeriod = tmpGracePeriod
    }
  }

  /// Progress, reported after each object.
  public struct Progress: Sendable {
    /// Objects checked so far, this one included.
    public var objectsChecked: Int
    /// Objects the walk found, the number `objectsChecked` counts up to.
    public var objectsTotal: Int
    /// Chunk bytes whose CRC has been verified so far, over every object (0 in a fast check).
    public var bytesVerified: Int64
  }

  /// Why a check could not run at all (exit status 8).
  public enum OperationalError: Error, Sendable, CustomStringConvertible {
    /// The cache root at `path` is missing, not a directory, or cannot be listed; `reason` says which.
    case cannotRead(path: FilePath, reason: String)
    /// The root's `FORMAT` marker names a major version this build does not read (`found` is its text).
    case unsupportedFormat(path: FilePath, found: String)

    /// One line for a person, naming the path; nothing was checked.
    public var description: String {
      switch self {
      case .cannotRead(let path, let reason): "cannot read \(path): \(reason)"
      case .unsupportedFormat(let path, let found):
        "\(path)/FORMAT says '\(found)'; this build reads major version \(CacheFormat.major) only; nothing checked"
      }
    }
  }

  /// The cache root checked (`FilePath` drops trailing slashes); finding paths are relative to it.
  public let root: FilePath
  /// `root` as text, the prefix of every path the checker opens.
  let rootPath: String
  /// What the checker does: check or repair, full or fast.
  public let options: Options
  let store: ShardedStore
  /// Whether a `--fast` check looks at objects during the walk (`WalkEvaluation`); tests compare with false.
  var evaluatesDuringWalk = true
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

  /// A checker for the cache at `root`. Nothing is read until `run`, so a missing or unreadable root is
  /// reported there, as `OperationalError.cannotRead`.
  public init(root: FilePath, options: Options = Options()) {
    self.root = root
    self.rootPath = root.string
    self.options = options
    self.store = ShardedStore(unvalidatedRoot: root.string)
  }

  /// Where each file of one object was found (paths relative to the root).
  struct ObjectFiles {
    var data: String?
    var manifest: String?
    /// Status of the data file from the directory walk (same inode after a move).
    var dataStatus: FileStatus?
  }

  /// Runs the check. `isCancelled` is polled between objects; `progress` is called after each object.
  /// `now` is seconds since the epoch, the clock the age of `tmp/` files is measured against.
  ///
  /// Throws `OperationalError` when the root cannot be read or its format is not supported; everything
  /// wrong inside the tree is a finding in the returned report instead. A cancelled run returns what it
  /// found so far, with `CheckReport.cancelled` set.
  public func run(
    now: Double = Date().timeIntervalSince1970, isCancelled: @Sendable () -> Bool = { false },
    progress: (Progress) -> Void = { _ in }
  ) throws(OperationalError) -> CheckReport {
    var report = CheckReport()
    let rootInfo: FileStatus?
    do { rootInfo = try FileSystemCalls.status(rootPath, followingSymlink: true) } catch {
      throw .cannotRead(path: root, reason: "\(error)")
    }
    guard let rootInfo else { throw .cannotRead(path: root, reason: "no such directory") }
    guard rootInfo.isDirectory else { throw .cannotRead(path: root, reason: "not a directory") }
    guard let rootEntries = try? FileSystemCalls.scanDirectory(rootPath) else {
      throw .cannotRead(path: root, reason: "cannot list the directory")
    }
    try checkMarker(rootEntries, &report)
    for entry in rootEntries.sorted(by: { $0.name < $1.name }) {
      switch entry.name {
      case let name where (name == "objects" || name == "tmp") && !entry.status.isDirectory:
        report.findings.append(
          wrongType(entry.name, expected: "directory", consequence: "nothing can be written to the cache"))
      case "groups" where !entry.status.isDirectory:
        report.findings.append(
          wrongType(entry.name, expected: "directory", consequence: "no object can join a group"))
      case "namespaces" where !entry.status.isDirectory:
        report.findings.append(
          wrongType(entry.name, expected: "directory", consequence: "no namespace can be used"))
      case "files" where !entry.status.isDirectory:
        report.findings.append(
          wrongType(entry.name, expected: "directory", consequence: "fileURL(for:) cannot name objects"))
      case "files": checkFileLinks(&report)
      case CacheFormat.fileName, "objects", "tmp", "groups", "namespaces", Compactor.scrubCursorName,
        ShardedStore.usageFileName:
        continue
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
    let fastCheck = options.fast && !options.repair && evaluatesDuringWalk
    var (objects, walkEvaluations) = collectObjects(&report, evaluate: fastCheck)
    checkTemporaryFiles(now: now, &report)
    defer { directories.closeAll() }
    let ids = objects.keys.sorted()
    var groupOf: [ObjectID: String] = [:]  // from the manifests the checks read
    for (index, id) in ids.enumerated() {
      if isCancelled() {
        report.cancelled = true
        break
      }
      if let evaluation = walkEvaluations[id], evaluation.placed, evaluation.matches(objects[id]!) {
        // Looked at during the walk and found clean: what `checkObject` would find now.
        add(evaluation.totals, to: &report.totals)
        groupOf[id] = evaluation.group
      } else {
        groupOf[id] = checkObject(id, files: &objects[id]!, &report)
      }
      progress(
        Progress(
          objectsChecked: index + 1, objectsTotal: ids.count, bytesVerified: report.totals.bytesVerified))
    }
    if !report.cancelled { checkGroupIndex(ids, groupOf: groupOf, &report) }
    if !report.cancelled { checkNamespaces(now: now, isCancelled: isCancelled, &report) }
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
    let text = (try? String(contentsOfFile: "\(rootPath)/\(CacheFormat.fileName)", encoding: .utf8)) ?? ""
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
    (try? CacheFormat.writeMarker(root: rootPath)) != nil ? .repaired : .failed
  }

  // MARK: Tree walk

  /// At most this many threads walk shard directories at once (each takes whole outer shards).
  static let maxWalkers = 4

  /// One object found with its data file and manifest side by side in one shard directory, looked at during
  /// the walk without a lock (`--fast` check only): its totals when the look found nothing. It stands for the
  /// object only while the walk's final files of the object are these (`matches`).
  struct WalkEvaluation: Sendable {
    var data: String?
    var manifest: String?
    /// Both files are where the object's id puts them.
    var placed: Bool
    var totals: CheckTotals
    /// The manifest's group (`CacheChecker+Groups`).
    var group: String?

    func matches(_ files: ObjectFiles) -> Bool { files.data == data && files.manifest == manifest }
  }

  /// What the walk found under one entry of `objects/`, in the order a single-threaded walk finds it.
  private struct OuterWalk: Sendable {
    var findings: [CheckFinding] = []
    var files: [ObjectTreeFile] = []
    var evaluations: [(id: ObjectID, evaluation: WalkEvaluation)] = []
    /// Where the files of the next innermost directory start in `files`.
    var shardStart = 0
  }

  /// Walks `objects/` (`ObjectTreeWalker`, the store's own walk, with strays included and failures to list a
  /// directory ignored), reporting names that are not objects and entries of the wrong type. Outer shard
  /// directories are walked by up to `maxWalkers` threads; the findings come out as from one thread. With
  /// `evaluate` (a `--fast` check), each object whose files sit together is also looked at (`WalkEvaluation`)
  /// through the shard directory's open descriptor.
  func collectObjects(_ report: inout CheckReport, evaluate: Bool = false) -> (
    objects: [ObjectID: ObjectFiles], evaluations: [ObjectID: WalkEvaluation]
  ) {
    // Directories and manifests need only their type here (a manifest's size comes from reading it); data
    // files are stat'ed for their length and allocated blocks.
    let walker = ObjectTreeWalker(
      root: rootPath, includeStrays: true,
      statWhen: { name in
        let length = strlen(name)
        return length >= 5 && strcmp(name + length - 5, ".data") == 0
      }, threads: Self.maxWalkers, tolerant: true)
    let checker = self
    var shardListed: (@Sendable (inout OuterWalk, ObjectTreeShard) -> Void)?
    if evaluate { shardListed = { walk, shard in checker.evaluateInWalk(shard, into: &walk) } }
    let walks: [OuterWalk] =
      (try? walker.walk(
        { OuterWalk() }, visit: { walk, entry in checker.record(entry, into: &walk) },
        shardListed: shardListed))
      ?? []
    var objects: [ObjectID: ObjectFiles] = [:]
    objects.reserveCapacity(walks.reduce(0) { $0 + $1.files.count } / 2)
    var evaluations: [ObjectID: WalkEvaluation] = [:]
    for walk in walks {
      report.findings += walk.findings
      for file in walk.files {
        let recorded = file.isData ? objects[file.id]?.data : objects[file.id]?.manifest
        if let recorded, !keepsSecond(recorded, file, &report) { continue }
        if file.isData {
          objects[file.id, default: ObjectFiles()].data = file.relative
          objects[file.id]!.dataStatus = file.status
        } else {
          objects[file.id, default: ObjectFiles()].manifest = file.relative
        }
      }
      for (id, evaluation) in walk.evaluations where evaluations[id]?.placed != true {
        evaluations[id] = evaluation
      }
    }
    return (objects, evaluations)
  }

  /// What one entry of the walk means for the report.
  private func record(_ entry: ObjectTreeEntry, into walk: inout OuterWalk) {
    switch entry {
    case .objectFile(let file) where file.status.isRegular:
      walk.files.append(file)
    case .objectFile(let file):
      walk.findings.append(
        wrongType(file.relative, expected: "regular file", consequence: "the object cannot be used"))
    case .wrongType(let relative):
      walk.findings.append(
        wrongType(relative, expected: "directory", consequence: "objects of this shard cannot be used"))
    case .badShardName(let relative, let name):
      walk.findings.append(
        CheckFinding(
          path: relative, kind: .badShardName, severity: .warning,
          message: "shard directory name is not two lowercase hex digits", expected: "two hex digits",
          found: name))
    case .unknown(let relative, let topLevel):
      walk.findings.append(
        CheckFinding(
          path: relative, kind: .unknownEntry, severity: .warning,
          message: topLevel ? "unknown file in objects/; left alone" : "not a cache object; left alone"))
    }
  }

  /// Looks at the objects of one innermost directory whose manifest is in it (see `WalkEvaluation`).
  private func evaluateInWalk(_ shard: ObjectTreeShard, into walk: inout OuterWalk) {
    let prefix = shard.relative + "/"
    var here: [ObjectID: (files: ObjectFiles, placed: Bool)] = [:]
    for file in walk.files[walk.shardStart...] where file.relative.hasPrefix(prefix) {
      var entry = here[file.id] ?? (ObjectFiles(), true)
      if file.isData {
        entry.files.data = file.relative
        entry.files.dataStatus = file.status
      } else {
        entry.files.manifest = file.relative
      }
      entry.placed = entry.placed && file.placed
      here[file.id] = entry
    }
    walk.shardStart = walk.files.count
    for (id, (objectFiles, placed)) in here {
      guard let manifest = objectFiles.manifest else { continue }
      let name = String(manifest.utf8.dropFirst(prefix.utf8.count))!
      let look = evaluate(
        id, objectFiles, dataFile: nil, dataSize: objectFiles.dataStatus?.size, busy: false,
        manifestBytes: { try readFile(named: name, in: (shard.descriptor, shard.relative)) })
      guard look.findings.isEmpty else { continue }
      walk.evaluations.append(
        (
          id,
          WalkEvaluation(
            data: objectFiles.data, manifest: manifest, placed: placed && objectFiles.data != nil,
            totals: look.totals, group: look.manifest?.group)
        ))
    }
  }

  /// A finding for an entry of the wrong type where the layout has a directory or a regular file.
  func wrongType(_ relative: String, expected: String, consequence: String) -> CheckFinding {
    let found = ((try? FileSystemCalls.fileType("\(rootPath)/\(relative)")) ?? nil)?.rawValue ?? "file"
    return CheckFinding(
      path: relative, kind: .wrongType, severity: .error,
      message:
        "a \(found) where the cache keeps a \(expected); \(consequence) (never followed or deleted: remove it)",
      expected: expected, found: found)
  }

  // MARK: tmp/

  private func checkTemporaryFiles(now: Double, _ report: inout CheckReport) {
    for entry in (try? store.temporaryEntries()) ?? [] {
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
    guard age > options.tmpGracePeriod.seconds else { return }
    var finding = CheckFinding(
      path: relative, kind: .staleTemporaryFile, severity: .error,
      message: "staging file left by a writer that did not finish",
      expected: "younger than \(Int(options.tmpGracePeriod.seconds)) s", found: "\(Int(age)) s old")
    if options.repair {
      finding.action =
        (try? FileSystemCalls.unlinkFile("\(rootPath)/\(relative)")) != nil ? .repaired : .failed
    }
    report.findings.append(finding)
  }
}
