import Foundation
import Synchronization

/// The on-disk tree: `FORMAT`, `objects/ab/cd/<hex>.{data,manifest}` and `tmp/`.
///
/// It owns the rules every writer follows: manifests are replaced atomically through `tmp/`, a commit takes the
/// object's commit lock and merges with what another writer committed, and removal takes the in-use lock
/// exclusively without waiting, so an object open anywhere is never deleted. Opening a store reads the root
/// only; it never walks the tree.
package final class ShardedStore: Sendable {
  /// The cache root, as a path without trailing slashes.
  package let root: String
  /// Chunk size for objects created through this store (existing objects keep the one in their manifest).
  package let chunkSize: Int
  /// Whether commits fsync the data file before replacing the manifest (and the directory after).
  package let durability: Durability
  /// The largest length a new object's data file is given only when it is made (`ObjectDataFile.setSize`): 1
  /// TiB, or less on a file system whose files cannot be that large (`pathconf`'s `_PC_FILESIZEBITS` of the
  /// root: vfat 32, a 2 GiB bound). A larger length is given at once, so that a length the file system cannot
  /// hold (`EFBIG`) fails the call recording it (a miss's head check), not a write after the first bytes.
  package let largestDeferredFileSize: Int64
  /// Directory for staging files.
  package var tmpDirectory: String { "\(root)/tmp" }
  /// Directory holding the shard tree.
  package var objectsDirectory: String { "\(root)/objects" }

  /// Per-process memory of when each object's recency stamp was last bumped.
  private let lastTouched = Mutex<[ObjectID: Double]>([:])
  /// Minimum seconds between two recency bumps of one object by this process.
  static let touchInterval: Double = 60

  /// Opens the cache at `root`, creating it (mode 0700) if it does not exist or is empty.
  ///
  /// Throws `StoreError.notACache` for a non-empty directory without a `FORMAT` marker and
  /// `StoreError.unsupportedFormat` for a marker of another major version.
  ///
  /// With `create: false` (maintenance tools), a missing root throws `StoreError.noSuchCache` and a root without
  /// a marker throws `StoreError.notACache`; nothing is created.
  package init(root: String, chunkSize: Int = 1 << 20, durability: Durability = .durable, create: Bool = true)
    throws
  {
    guard (Manifest.minChunkSize...Manifest.maxChunkSize).contains(chunkSize) else {
      throw StoreError.invalidConfiguration(
        "chunk size \(chunkSize) is outside \(Manifest.minChunkSize)...\(Manifest.maxChunkSize)")
    }
    var cleaned = root
    while cleaned.count > 1 && cleaned.hasSuffix("/") { cleaned.removeLast() }
    self.root = cleaned
    self.chunkSize = chunkSize
    self.durability = durability
    try mapIO { try Self.prepareRoot(cleaned, create: create) }
    largestDeferredFileSize = Self.largestDeferredFileSize(under: cleaned)
  }

  /// See `largestDeferredFileSize`.
  private static func largestDeferredFileSize(under root: String) -> Int64 {
    let bound: Int64 = 1 << 40
    if BlockingCallCheck.isOn { BlockingCallCheck.check("pathconf", path: root) }
    let bits = pathconf(root, Int32(_PC_FILESIZEBITS))
    guard bits > 1, bits < 64 else { return bound }
    return min(bound, (Int64(1) << (bits - 1)) - 1)
  }

  /// A store over `root` as it is, without checking or creating anything: for the checker, which reports on
  /// trees whatever state they are in.
  init(unvalidatedRoot root: String) {
    var cleaned = root
    while cleaned.count > 1 && cleaned.hasSuffix("/") { cleaned.removeLast() }
    self.root = cleaned
    self.chunkSize = 1 << 20
    self.durability = .durable
    self.largestDeferredFileSize = 1 << 40
  }

  private static func prepareRoot(_ root: String, create: Bool) throws {
    let markerPath = "\(root)/\(CacheFormat.fileName)"
    if let info = try FileSystemCalls.status(root, followingSymlink: true) {
      guard info.isDirectory else { throw StoreError.notACache(path: FilePath(root), directory: false) }
    } else if !create {
      throw StoreError.noSuchCache(path: FilePath(root))
    } else {
      // Each missing directory is made 0700 by its mkdir: Foundation's createDirectory(attributes:) sets the
      // mode after making the directory, and a kill in between left the default (0755) for good.
      try mapIO { try FileSystemCalls.makeDirectories(root) }
    }
    if try FileSystemCalls.status(markerPath) != nil {
      let text = (try? String(contentsOfFile: markerPath, encoding: .utf8)) ?? ""
      guard let version = CacheFormat.parse(text) else {
        throw StoreError.unsupportedFormat(path: FilePath(root), found: CacheFormat.quoted(text))
      }
      guard version.major == CacheFormat.major else {
        throw StoreError.unsupportedFormat(
          path: FilePath(root), found: "mediacache-format \(version.major).\(version.minor)")
      }
    } else if !create {
      // An empty directory (systemd's CacheDirectory=; or a marker being staged in it) is no cache yet.
      let entries = try mapIO { try FileSystemCalls.directoryEntries(root) }
      let isEmpty = entries?.allSatisfy { $0.hasPrefix(".FORMAT.") }
      let path = FilePath(root)
      throw isEmpty ?? false ? StoreError.noSuchCache(path: path, empty: true) : .notACache(path: path)
    } else {
      let entries = try FileSystemCalls.directoryEntries(root) ?? []
      let ours: Set<String> = ["objects", "tmp", "groups", "namespaces", "files", Self.usageFileName]
      guard entries.allSatisfy({ ours.contains($0) || $0.hasPrefix(".FORMAT.") }) else {
        throw StoreError.notACache(path: FilePath(root))
      }
      try CacheFormat.writeMarker(root: root)
    }
    if create {
      // Once per cache: their names are flushed whatever the durability setting, like the marker's.
      let madeObjects = try FileSystemCalls.makeDirectory("\(root)/objects")
      let madeTmp = try FileSystemCalls.makeDirectory("\(root)/tmp")
      if madeObjects || madeTmp { try FileSystemCalls.syncDirectory(root) }
    }
  }

  /// The paths of object `id`.
  package func paths(for id: ObjectID) -> ObjectPaths { ObjectPaths(root: root, id: id) }

  /// Creates the object's shard directories (0700) if needed. Throws `StoreError.unexpectedFileType` if a path of
  /// the object holds something the layout does not put there (see `checkFileTypes`).
  ///
  /// Durable mode: a new directory's name is flushed into its parent before anything in it is relied on (a
  /// directory fsync of objects/ab/cd alone does not make objects/ab/cd reachable after a power loss). With
  /// `syncingNewDirectories` false the caller takes that on: `FileHandleAssetDataManager` flushes the whole
  /// chain (`syncShardChain`) before its first commit, off the path of a new object's first bytes.
  func ensureShard(for id: ObjectID, syncingNewDirectories: Bool = true) throws {
    let paths = paths(for: id)
    try checkFileTypes(of: id)
    let syncing = syncingNewDirectories && durability == .durable
    try mapIO {
      if try FileSystemCalls.makeDirectory(paths.outerShard), syncing {
        try FileSystemCalls.syncDirectory(objectsDirectory)
      }
      if try FileSystemCalls.makeDirectory(paths.directory), syncing {
        try FileSystemCalls.syncDirectory(paths.outerShard)
      }
    }
  }

  /// Flushes the object's directory, its outer shard and `objects`, innermost first: after it, the names of the
  /// data file and of both shard directories are on disk, whoever created them.
  func syncShardChain(for id: ObjectID) throws {
    let paths = paths(for: id)
    try mapIO {
      try FileSystemCalls.syncDirectory(paths.directory)
      try FileSystemCalls.syncDirectory(paths.outerShard)
      try FileSystemCalls.syncDirectory(objectsDirectory)
    }
  }

  /// Checks, with `lstat`, that what exists of the object's paths is what the layout puts there: real
  /// directories for `objects/ab` and `objects/ab/cd`, regular files for the data file and the manifest.
  /// Missing entries are fine. Anything else (a symlink, which may lead out of the cache; a FIFO, whose opening
  /// blocks; a file where a directory belongs) throws `StoreError.unexpectedFileType` before any of them is
  /// opened, so the store never follows or opens it. Reading (`readManifest`), writing (`ensureShard`),
  /// removal, scrubbing and `isBusy` all start here.
  func checkFileTypes(of id: ObjectID) throws {
    let paths = paths(for: id)
    for directory in [paths.outerShard, paths.directory] {
      guard let type = try mapIO({ try FileSystemCalls.fileType(directory) }) else { return }
      if type != .directory {
        throw StoreError.unexpectedFileType(
          path: FilePath(directory), expected: "directory", found: type.rawValue)
      }
    }
    for file in [paths.data, paths.manifest] {
      if let type = try mapIO({ try FileSystemCalls.fileType(file) }), type != .regularFile {
        throw StoreError.unexpectedFileType(
          path: FilePath(file), expected: "regular file", found: type.rawValue)
      }
    }
  }

  // MARK: Manifests

  /// The object's committed manifest, nil if it has none. Throws `StoreError.corruptManifest` if the file
  /// cannot be decoded (or names another object), `StoreError.unexpectedFileType` if a path of the object is
  /// not what the layout puts there, and `StoreError.io` (with the real errno, such as EACCES) if it cannot be
  /// read.
  package func readManifest(_ id: ObjectID) throws -> Manifest? {
    try readManifest(id, checkingFileTypes: true)
  }

  /// `readManifest`, without the `lstat`s of `checkFileTypes` when the caller has just made them. The manifest
  /// is opened with `O_NOFOLLOW | O_NONBLOCK` and checked with `fstat` whatever the choice.
  func readManifest(_ id: ObjectID, checkingFileTypes: Bool) throws -> Manifest? {
    let path = paths(for: id).manifest
    if checkingFileTypes { try checkFileTypes(of: id) }
    let bytes: Data
    do {
      let file = try SystemFile(path: path, writable: false)
      defer { file.close() }
      bytes = try Self.readAll(file)
    } catch let error as SystemCallError
      where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory
    {
      return nil
    } catch let error as SystemCallError {
      // The failed call and its errno (EACCES, EIO, …), not a generic "read failed".
      throw StoreError(error)
    }
    do {
      return try ManifestCodec.decode(bytes, expectedID: id)
    } catch {
      throw StoreError.corruptManifest(id, path: FilePath(path), error)
    }
  }

  /// The whole content of a small file, read to end of file (in case it grew): sized by `sizeHint`, else by
  /// `fstat`.
  static func readAll(_ file: SystemFile, sizeHint: Int64? = nil) throws -> Data {
    var data = Data(count: Int(max(0, try sizeHint ?? file.status().size)) + 1)
    var total = 0
    while true {
      if total == data.count { data.count *= 2 }
      let count = try data.withUnsafeMutableBytes { raw in
        try file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[total...]), at: Int64(total))
      }
      total += count
      if count == 0 || total < data.count { break }
    }
    data.count = total
    return data
  }

  /// Writes `manifest` as the object's manifest: staged in `tmp/`, (durable) fsynced, renamed over the old
  /// one, and (durable) the directory fsynced. Callers hold the commit lock.
  func replaceManifest(_ manifest: Manifest) throws {
    let bytes = try ManifestCodec.encode(manifest)
    let target = paths(for: manifest.objectID).manifest
    let staging =
      "\(tmpDirectory)/\(manifest.objectID.hex).\(getpid()).\(UInt64.random(in: 0...UInt64.max)).manifest"
    try mapIO {
      do {
        let file = try createStagingFile(staging)
        try bytes.withUnsafeBytes { try file.write($0, at: 0) }
        if durability == .durable { try file.sync() }
      } catch {
        _ = try? FileSystemCalls.unlinkFile(staging)
        throw error
      }
      do {
        try FileSystemCalls.renameFile(staging, to: target)
      } catch {
        _ = try? FileSystemCalls.unlinkFile(staging)
        throw error
      }
      if durability == .durable { try FileSystemCalls.syncDirectory(paths(for: manifest.objectID).directory) }
    }
  }

  /// Creates a staging file in `tmp/` (0600), recreating `tmp/` if someone removed it (git does not keep
  /// empty directories; an operator may have cleaned it).
  func createStagingFile(_ path: String) throws -> SystemFile {
    do {
      return try SystemFile(path: path, writable: true, create: true)
    } catch let error as SystemCallError where error.errno == .noSuchFileOrDirectory {
      try FileSystemCalls.makeDirectory(tmpDirectory)
      return try SystemFile(path: path, writable: true, create: true)
    }
  }

  /// Creates object `id`'s data file already holding the in-use lock: the file is made and locked in `tmp/`,
  /// then linked into place, so no other process ever sees a new data file that nobody has locked (a
  /// checker or compactor would take it for an orphan). Returns nil if a data file appeared there first.
  ///
  /// In durable mode the new name is not flushed here: whoever lists the file's chunks must flush the shard
  /// directory first (`FileHandleAssetDataManager` does, before its first commit, on its background queue), so
  /// a new object's first byte does not wait for a directory fsync.
  func createLockedDataFile(for id: ObjectID) throws -> SystemFile? {
    let target = paths(for: id).data
    let staging = "\(tmpDirectory)/\(id.hex).\(getpid()).\(UInt64.random(in: 0...UInt64.max)).data"
    return try mapIO {
      let file = try createStagingFile(staging)
      defer { _ = try? FileSystemCalls.unlinkFile(staging) }
      _ = try file.lock(exclusive: false, wait: true)
      do {
        try FileSystemCalls.linkFile(staging, to: target)
      } catch let error as SystemCallError
        where error.errno == .fileExists || error.errno == .noSuchFileOrDirectory
      {
        // Another writer got there first, or an evictor removed the emptied shard directory: the caller
        // starts over (opening the existing file, or recreating the shard).
        file.close()
        return nil
      }
      // Errors must name the data file, not the staging name that is about to go.
      return file.renamed(to: target)
    }
  }

  /// Commits `change` for the object whose data file is `file` (opened for writing), merging with the manifest
  /// now on disk, and returns the manifest as written. Other writers' chunks are kept; an origin version that
  /// differs from the one on disk is not mixed in (see `ManifestChange`).
  func commit(_ change: ManifestChange, base: Manifest, dataFile file: SystemFile) throws -> CommitResult {
    let id = base.objectID
    let gateKey = paths(for: id).data
    acquireGate(gateKey)
    defer { releaseGate(gateKey) }
    try mapIO { try file.commitLock(true) }
    defer { try? file.commitLock(false) }
    let onDisk: Manifest?
    do { onDisk = try readManifest(id) } catch let error as StoreError where error.code == .corruptManifest {
      onDisk = nil
    }
    let merged = change.merge(into: onDisk, base: base)
    if merged.manifest != onDisk { try replaceManifest(merged.manifest) }
    return merged
  }

  private func acquireGate(_ key: String) {
    while true {
      let inserted = commitGate.withLock { $0.insert(key).inserted }
      if inserted { return }
      sched_yield()
    }
  }

  private func releaseGate(_ key: String) { _ = commitGate.withLock { $0.remove(key) } }

  // MARK: Recency

  /// Bumps the object's recency stamp (the manifest's modification time), at most once a minute per object
  /// in this process. Errors are ignored: recency is a hint. With `touchingLater`, the stamp is written on the
  /// I/O executor and this call makes no blocking call (a read on an event loop).
  package func noteAccess(
    _ id: ObjectID, now: Double = Date().timeIntervalSince1970, touchingLater: Bool = false
  ) {
    let due = lastTouched.withLock { touched -> Bool in
      if let last = touched[id], now - last < Self.touchInterval { return false }
      if touched.count > 50_000 { touched = touched.filter { now - $0.value < Self.touchInterval } }
      touched[id] = now
      return true
    }
    guard due else { return }
    let manifest = paths(for: id).manifest
    if touchingLater {
      IOExecutor.shared.submit { try? FileSystemCalls.touch(manifest) }
    } else {
      try? FileSystemCalls.touch(manifest)
    }
  }

  // MARK: Listing

  /// Every object id that has a data file or a manifest. This walks the tree: for tools and `ls`, never for
  /// opening the cache.
  package func allObjectIDs() throws -> [ObjectID] {
    // Names only: an object whose file is not a regular file is listed too (using it then throws
    // `unexpectedFileType`, and `mediacache clear` leaves it in place).
    let walker = ObjectTreeWalker(root: root, statWhen: { _ in false })
    let parts = try mapIO {
      try walker.walk({ Set<ObjectID>() }) { ids, entry in
        if case .objectFile(let file) = entry, file.placed { ids.insert(file.id) }
      }
    }
    return parts.reduce(into: Set<ObjectID>()) { $0.formUnion($1) }.sorted()
  }

  static func isShardName(_ name: String) -> Bool { ObjectTreeWalker.isShardName(name) }

  /// Bytes the object occupies on disk: allocated blocks of the data file plus the manifest's size.
  package func diskUsage(_ id: ObjectID) throws -> Int64 {
    let paths = paths(for: id)
    return try mapIO {
      (try FileSystemCalls.status(paths.data)?.allocatedBytes ?? 0)
        + (try FileSystemCalls.status(paths.manifest)?.size ?? 0)
    }
  }

  /// The entries of `tmp/` (names and `lstat`s), sorted by name; empty when there is no `tmp/`. The one listing
  /// of it: the reaper below, the compactor's dry run and `cache-fsck` all come here.
  func temporaryEntries() throws -> [(name: String, status: FileStatus)] {
    try mapIO { try FileSystemCalls.scanDirectory(tmpDirectory) ?? [] }.sorted { $0.name < $1.name }
  }

  /// Removes the regular files in `tmp/` last modified more than `age` seconds ago (with `dryRun`, only counts
  /// them); returns how many. Younger files may belong to a live writer and are left alone.
  @discardableResult
  package func reapStaleTemporaryFiles(
    olderThan age: Double, now: Double = Date().timeIntervalSince1970, dryRun: Bool = false
  ) throws -> Int {
    var removed = 0
    for entry in try temporaryEntries() where entry.status.isRegular && now - entry.status.modified > age {
      if dryRun {
        removed += 1
      } else if try mapIO({ try FileSystemCalls.unlinkFile("\(tmpDirectory)/\(entry.name)") }) {
        removed += 1
      }
    }
    return removed
  }
}

/// Within one process, commits of one object (keyed by its data path, whatever `ShardedStore` instance makes
/// them) are serialised here as well as by the commit lock: needed where that lock is a POSIX record lock,
/// harmless where it is an open-file-description lock.
private let commitGate = Mutex<Set<String>>([])
