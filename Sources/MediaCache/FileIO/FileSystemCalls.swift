import Synchronization
import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Path operations: each names its system call and throws `SystemCallError`.
enum FileSystemCalls {
  /// The status of `path`, or nil if nothing is there. Does not follow a final symlink unless asked to.
  ///
  /// The corresponding C function is `lstat` (or `stat` when following).
  static func status(_ path: String, followingSymlink: Bool = false) throws -> FileStatus? {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("lstat", path: path) }
    var info = stat()
    while (followingSymlink ? stat(path, &info) : lstat(path, &info)) != 0 {
      let code = errnoValue()
      if code == EINTR { continue }
      if code == ENOENT || code == ENOTDIR { return nil }
      throw SystemCallError(syscall: "lstat", path: path, errno: Errno(rawValue: code))
    }
    return FileStatus(info)
  }

  /// Creates a directory with mode 0700; an existing directory is fine. Returns whether it created it.
  ///
  /// The corresponding C function is `mkdir`.
  @discardableResult
  static func makeDirectory(_ path: String) throws -> Bool {
    try faultPoint(IOEvent(operation: .makeDirectory, path: path), syscall: "mkdir") {
      if mkdir(path, 0o700) == 0 { return true }
      let code = errnoValue()
      if code == EEXIST, let info = try status(path), info.isDirectory { return false }
      throw SystemCallError(syscall: "mkdir", path: path, errno: Errno(rawValue: code))
    }
  }

  /// Creates `path` and its missing parents, each with mode 0700 (`makeDirectory`); existing ones are kept as
  /// they are.
  static func makeDirectories(_ path: String) throws {
    var missing: [String] = []
    var current = FilePath(path).lexicallyNormalized()
    while !current.isEmpty, current != current.root.map({ FilePath(root: $0) }) {
      // A link to a directory (`/tmp` on some systems, a cache path the user made a link) is a directory here.
      if let info = try status(current.string, followingSymlink: true) {
        guard info.isDirectory else {
          throw SystemCallError(syscall: "mkdir", path: current.string, errno: .notDirectory)
        }
        break
      }
      missing.append(current.string)
      let parent = current.removingLastComponent()
      if parent == current { break }
      current = parent
    }
    for directory in missing.reversed() { try makeDirectory(directory) }
  }

  /// Removes a file. Returns false if it was already gone.
  ///
  /// The corresponding C function is `unlink`.
  @discardableResult
  static func unlinkFile(_ path: String) throws -> Bool {
    try faultPoint(IOEvent(operation: .unlink, path: path), syscall: "unlink") {
      if unlink(path) == 0 { return true }
      let code = errnoValue()
      if code == ENOENT { return false }
      throw SystemCallError(syscall: "unlink", path: path, errno: Errno(rawValue: code))
    }
  }

  /// Atomically replaces `destination` with `source` (same file system).
  ///
  /// The corresponding C function is `rename`.
  static func renameFile(_ source: String, to destination: String) throws {
    _ = try faultPoint(IOEvent(operation: .rename, path: source, destination: destination), syscall: "rename")
    {
      try retrying("rename", source) { rename(source, destination) }
    }
  }

  /// Opens a directory for `openat`; the caller closes the descriptor with `closeDescriptor`.
  ///
  /// The corresponding C function is `open` (`O_RDONLY | O_DIRECTORY`).
  static func openDirectory(_ path: String) throws -> Int32 {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("open", path: path) }
    return try retrying("open", path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
  }

  /// Closes a raw descriptor from `openDirectory`.
  ///
  /// The corresponding C function is `close`.
  static func closeDescriptor(_ fd: Int32) { _ = systemClose(fd) }

  /// Makes `destination` a second name of `source`; fails with EEXIST if `destination` exists.
  ///
  /// The corresponding C function is `link`.
  static func linkFile(_ source: String, to destination: String) throws {
    _ = try faultPoint(IOEvent(operation: .link, path: source, destination: destination), syscall: "link") {
      try retrying("link", source) { link(source, destination) }
    }
  }

  /// Creates a symbolic link at `path` whose target is `target` (relative to the link's directory); returns
  /// false if `path` exists already.
  ///
  /// The corresponding C function is `symlink`.
  @discardableResult
  static func makeSymbolicLink(_ path: String, to target: String) throws -> Bool {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("symlink", path: path) }
    if symlink(target, path) == 0 { return true }
    let code = errnoValue()
    if code == EEXIST { return false }
    throw SystemCallError(syscall: "symlink", path: path, errno: Errno(rawValue: code))
  }

  /// Flushes a directory's entries (after a rename or create in it).
  ///
  /// The corresponding C functions are `open` (`O_RDONLY | O_DIRECTORY`) and `fsync`.
  static func syncDirectory(_ path: String) throws {
    try faultPoint(IOEvent(operation: .syncDirectory, path: path), syscall: "fsync") {
      let fd = try retrying("open", path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
      defer { _ = systemClose(fd) }
      _ = try retrying("fsync", path) { fsync(fd) }
    }
  }

  /// Sets a file's access and modification times to now, without opening it for writing. A symbolic link at
  /// `path` gets its own times; the file it names is not touched (the cache never puts a link where it keeps
  /// an object's file, and the walks read its times with `lstat`, so a link planted there ages as itself).
  ///
  /// The corresponding C function is `utimensat` (the path form of `futimens`), with `AT_SYMLINK_NOFOLLOW`.
  static func touch(_ path: String) throws {
    _ = try faultPoint(IOEvent(operation: .touch, path: path), syscall: "utimensat") {
      try retrying("utimensat", path) { utimensat(AT_FDCWD, path, nil, AT_SYMLINK_NOFOLLOW) }
    }
  }

  /// Sets a file's modification (and access) time to `seconds` since the epoch: a trimmed object's manifest
  /// keeps its recency (`ObjectTrim`); tests and tools set times with it too. As `touch`, a symbolic link gets
  /// its own times, not the file it names.
  ///
  /// The corresponding C function is `utimensat`, with `AT_SYMLINK_NOFOLLOW`.
  static func setModificationTime(_ path: String, seconds: Double) throws {
    let whole = Int(seconds.rounded(.down))
    let spec = timespec(tv_sec: whole, tv_nsec: Int((seconds - Double(whole)) * 1e9))
    var times = [spec, spec]
    _ = try faultPoint(IOEvent(operation: .touch, path: path), syscall: "utimensat") {
      try retrying("utimensat", path) { utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) }
    }
  }

  /// The names in a directory, without `.` and `..`; nil if the directory does not exist.
  ///
  /// The corresponding C functions are `opendir`, `readdir` and `closedir`.
  static func directoryEntries(_ path: String) throws -> [String]? {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("opendir", path: path) }
    guard let dir = opendir(path) else {
      let code = errnoValue()
      if code == ENOENT || code == ENOTDIR { return nil }
      throw SystemCallError(syscall: "opendir", path: path, errno: Errno(rawValue: code))
    }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
      }
      if name != "." && name != ".." { names.append(name) }
    }
    return names
  }

  /// Removes an empty directory; returns false if it is not empty or gone.
  ///
  /// The corresponding C function is `rmdir`.
  @discardableResult
  static func removeEmptyDirectory(_ path: String) -> Bool {
    let removed = try? faultPoint(IOEvent(operation: .removeDirectory, path: path), syscall: "rmdir") {
      if rmdir(path) == 0 { return true }
      throw SystemCallError(syscall: "rmdir", path: path, errno: Errno(rawValue: errnoValue()))
    }
    return removed ?? false
  }
}

@inline(__always)
func systemClose(_ fd: Int32) -> Int32 {
  #if canImport(Glibc)
    return Glibc.close(fd)
  #else
    return Darwin.close(fd)
  #endif
}

extension FileSystemCalls {
  /// The entries of a directory with their status (not following symlinks), in one pass; nil if the directory
  /// does not exist. Entries that vanish while listed are left out.
  ///
  /// The corresponding C functions are `opendir`, `readdir`, `fstatat` (`AT_SYMLINK_NOFOLLOW`) and `closedir`.
  ///
  /// With `statWhen`, only the names it accepts are `fstatat`ed; the others carry just their type from
  /// `d_type` (`isTypeOnly`), which saves a system call per entry (falls back to `fstatat` where the file
  /// system does not report types).
  static func scanDirectory(_ path: String, statWhen: ((UnsafePointer<CChar>) -> Bool)? = nil) throws
    -> [(name: String, status: FileStatus)]?
  {
    try scanDirectory(path, statWhen: statWhen) { _, entries in entries }
  }

  /// `scanDirectory(_:statWhen:)`, then `body` with the entries and the directory's descriptor, still open (for
  /// `openat`/`fstatat` of the entries without resolving the directory's path again; closed after `body`).
  ///
  /// With `parent`, the directory is entry `name` of that open directory and `path` only names it in errors
  /// (`openat` and `fdopendir`: one component to resolve instead of the whole path).
  static func scanDirectory<Result>(
    _ path: String, parent: (descriptor: Int32, name: String)? = nil,
    statWhen: ((UnsafePointer<CChar>) -> Bool)?,
    _ body: (_ descriptor: Int32, _ entries: [(name: String, status: FileStatus)]) throws -> Result
  ) throws -> Result? {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("opendir", path: path) }
    let opened: OpaquePointer?
    if let parent {
      var fd: Int32
      repeat {
        fd = openat(parent.descriptor, parent.name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      } while fd < 0
        && errnoValue() == EINTR
      opened = fd < 0 ? nil : fdopendir(fd)
      if fd >= 0 && opened == nil {
        let code = errnoValue()
        _ = systemClose(fd)
        errno = code
      }
    } else {
      opened = opendir(path)
    }
    guard let dir = opened else {
      let code = errnoValue()
      if code == ENOENT || code == ENOTDIR { return nil }
      throw SystemCallError(syscall: "opendir", path: path, errno: Errno(rawValue: code))
    }
    defer { closedir(dir) }
    let descriptor = dirfd(dir)
    var result: [(name: String, status: FileStatus)] = []
    var info = stat()
    while let entry = readdir(dir) {
      let ok = withUnsafeBytes(of: entry.pointee.d_name) { raw -> String? in
        let name = raw.bindMemory(to: CChar.self).baseAddress!
        if name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0)) { return nil }
        let type = entry.pointee.d_type
        if let statWhen, !statWhen(name), type == UInt8(DT_REG) || type == UInt8(DT_DIR) {
          info = stat()
          info.st_mode = type == UInt8(DT_DIR) ? S_IFDIR : S_IFREG
          return String(cString: name)
        }
        guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return String(cString: name)
      }
      if let name = ok { result.append((name, FileStatus(info))) }
    }
    return try body(descriptor, result)
  }

  /// Bytes available to an unprivileged user on the file system holding `path`.
  ///
  /// The corresponding C function is `statvfs`.
  static func availableBytes(_ path: String) throws -> Int64 {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("statvfs", path: path) }
    var info = statvfs()
    _ = try retrying("statvfs", path) { statvfs(path, &info) }
    return Int64(info.f_bavail) * Int64(info.f_frsize)
  }
}
