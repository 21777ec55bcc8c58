import Synchronization
import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A failed system call: which call, on which path, and the errno it returned.
///
/// The store layer turns it into `StoreError.io`, which says the same to a person.
struct SystemCallError: Error, Sendable, Equatable {
  var syscall: String
  var path: String
  var errno: Errno
}

/// Retries `body` while it fails with EINTR; returns its result or throws the errno as `SystemCallError`.
@inline(__always)
private func retrying(_ syscall: String, _ path: String, _ body: () -> Int32) throws -> Int32 {
  while true {
    let result = body()
    if result != -1 { return result }
    let code = errnoValue()
    if code == EINTR { continue }
    throw SystemCallError(syscall: syscall, path: path, errno: Errno(rawValue: code))
  }
}

@inline(__always)
private func errnoValue() -> Int32 {
  #if canImport(Glibc)
    return Glibc.errno
  #else
    return Darwin.errno
  #endif
}

/// One open file descriptor and the path it was opened by. All raw descriptor work of the library goes through
/// here; each method names the system call it makes.
///
/// The descriptor is closed by `close()` or on deinit. Callers must not use it after `close()`: owners guard
/// that with their own state (the descriptor number could be reused).
final class SystemFile: Sendable {
  let descriptor: FileDescriptor
  let path: String
  private let isOpen = Atomic<Bool>(true)

  /// Opens `path`, which must be a regular file. With `create`, a missing file is created with mode 0600.
  ///
  /// A final symlink is not followed (`O_NOFOLLOW`: `ELOOP`, which `StoreError` reports as
  /// `unexpectedFileType`) and a FIFO or device does not block the open (`O_NONBLOCK`, no effect on regular
  /// files); whatever was opened is checked with `fstat`, so an entry swapped in after a caller's `lstat` is
  /// still refused.
  ///
  /// The corresponding C functions are `open` (with `O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK`) and `fstat`.
  init(path: String, writable: Bool, create: Bool = false) throws {
    var options: FileDescriptor.OpenOptions = [.closeOnExec, .noFollow, .nonBlocking]
    if create { options.insert(.create) }
    descriptor = try faultPoint(
      IOEvent(operation: .open, path: path, creates: create), syscall: "open",
      resultDescriptor: { $0.rawValue }
    ) {
      do {
        return try FileDescriptor.open(
          FilePath(path), writable ? .readWrite : .readOnly, options: options,
          permissions: create ? [.ownerReadWrite] : nil, retryOnInterrupt: true)
      } catch let code as Errno {
        throw SystemCallError(syscall: "open", path: path, errno: code)
      }
    }
    self.path = path
    try Self.requireRegularFile(descriptor.rawValue, path: path)
  }

  /// Throws `StoreError.unexpectedFileType` (closing `fd`) unless it is a regular file.
  private static func requireRegularFile(_ fd: Int32, path: String) throws {
    var info = stat()
    guard fstat(fd, &info) == 0 else { return }  // the first read or write reports the error
    let type: FileType? =
      switch info.st_mode & S_IFMT {
      case S_IFREG: nil
      case S_IFDIR: .directory
      case S_IFIFO: .fifo
      case S_IFSOCK: .socket
      case S_IFCHR: .characterDevice
      case S_IFBLK: .blockDevice
      default: .unknown
      }
    if let type {
      _ = systemClose(fd)
      throw StoreError.unexpectedFileType(path: path, expected: "regular file", found: type.rawValue)
    }
  }

  /// Opens `name` inside an open directory, read-only: one path component to resolve instead of the whole
  /// path (the checker reads many small files of one shard in a row).
  ///
  /// Like `init(path:writable:create:)`, a symlink, FIFO or other non-regular entry is refused, and opening
  /// one neither waits for a writer nor makes a terminal the controlling one.
  ///
  /// The corresponding C functions are `openat` (with `O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`) and
  /// `fstat`.
  init(directory: Int32, name: String, displayPath: String) throws {
    let fd = try faultPoint(
      IOEvent(operation: .open, path: displayPath), syscall: "openat", resultDescriptor: { $0 }
    ) {
      try retrying("openat", displayPath) {
        openat(directory, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
      }
    }
    try Self.requireRegularFile(fd, path: displayPath)
    descriptor = FileDescriptor(rawValue: fd)
    path = displayPath
  }

  private init(adopting descriptor: FileDescriptor, path: String) {
    self.descriptor = descriptor
    self.path = path
  }

  /// The same open descriptor (and its locks), now known by `newPath` (after a `link` or `rename`), so errors
  /// name the file as it is now called; this instance lets go of it without closing it.
  func renamed(to newPath: String) -> SystemFile {
    _ = isOpen.exchange(false, ordering: .acquiringAndReleasing)
    return SystemFile(adopting: descriptor, path: newPath)
  }

  deinit { close() }

  /// Closes the descriptor (releasing every lock taken through it); later calls do nothing.
  ///
  /// The corresponding C function is `close`.
  func close() {
    if isOpen.exchange(false, ordering: .acquiringAndReleasing) { try? descriptor.close() }
  }

  /// Reads until `buffer` is full or end of file, at `offset`; returns the bytes read.
  ///
  /// The corresponding C function is `pread`.
  func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
    let event = IOEvent(
      operation: .read, path: path, descriptor: descriptor.rawValue, offset: offset,
      length: Int64(buffer.count))
    return try faultPoint(event, syscall: "pread") { try readUnhooked(into: buffer, at: offset) }
  }

  private func readUnhooked(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
    var done = 0
    while done < buffer.count {
      let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
      let count: Int
      do {
        count = try descriptor.read(fromAbsoluteOffset: offset + Int64(done), into: slice)
      } catch let code as Errno {
        throw SystemCallError(syscall: "pread", path: path, errno: code)
      }
      if count == 0 { break }
      done += count
    }
    return done
  }

  /// Writes all of `buffer` at `offset`.
  ///
  /// The corresponding C function is `pwrite`.
  func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws {
    let event = IOEvent(
      operation: .write, path: path, descriptor: descriptor.rawValue, offset: offset,
      length: Int64(buffer.count))
    try faultPoint(event, syscall: "pwrite") { try writeUnhooked(buffer, at: offset) }
  }

  private func writeUnhooked(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws {
    var done = 0
    while done < buffer.count {
      let slice = UnsafeRawBufferPointer(rebasing: buffer[done...])
      do {
        done += try descriptor.write(toAbsoluteOffset: offset + Int64(done), slice)
      } catch let code as Errno {
        throw SystemCallError(syscall: "pwrite", path: path, errno: code)
      }
    }
  }

  /// Flushes the file's data and metadata to stable storage.
  ///
  /// The corresponding C function is `fsync`.
  func sync() throws {
    let event = IOEvent(operation: .sync, path: path, descriptor: descriptor.rawValue)
    _ = try faultPoint(event, syscall: "fsync") {
      try retrying("fsync", path) { fsync(descriptor.rawValue) }
    }
  }

  /// Flushes the file's data (and the metadata needed to read it back, such as its size) to stable storage,
  /// skipping timestamps.
  ///
  /// The corresponding C function is `fdatasync` on Linux, `fsync` elsewhere.
  func syncData() throws {
    let event = IOEvent(operation: .syncData, path: path, descriptor: descriptor.rawValue)
    #if os(Linux)
      _ = try faultPoint(event, syscall: "fdatasync") {
        try retrying("fdatasync", path) { fdatasync(descriptor.rawValue) }
      }
    #else
      _ = try faultPoint(event, syscall: "fsync") {
        try retrying("fsync", path) { fsync(descriptor.rawValue) }
      }
    #endif
  }

  /// Sets the file's length; growing it leaves a hole.
  ///
  /// The corresponding C function is `ftruncate`.
  func truncate(to length: Int64) throws {
    let event = IOEvent(operation: .truncate, path: path, descriptor: descriptor.rawValue, length: length)
    try faultPoint(event, syscall: "ftruncate") {
      do { try descriptor.resize(to: length) } catch let code as Errno {
        throw SystemCallError(syscall: "ftruncate", path: path, errno: code)
      }
    }
  }

  /// The file's status.
  ///
  /// The corresponding C function is `fstat`.
  func status() throws -> FileStatus {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("fstat", path: path) }
    var info = stat()
    _ = try retrying("fstat", path) { fstat(descriptor.rawValue, &info) }
    return FileStatus(info)
  }

  /// Takes a whole-file `flock`: shared or exclusive, waiting or not. Returns false when `wait` is false and
  /// another open file description holds a conflicting lock.
  ///
  /// The corresponding C function is `flock`.
  func lock(exclusive: Bool, wait: Bool) throws -> Bool {
    let operation = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB)
    if BlockingCallCheck.isOn { BlockingCallCheck.check("flock", path: path) }
    do {
      _ = try retrying("flock", path) { flock(descriptor.rawValue, operation) }
      return true
    } catch let error as SystemCallError where error.errno == .wouldBlock {
      return false
    }
  }

  /// Releases the `flock` held through this descriptor.
  ///
  /// The corresponding C function is `flock` with `LOCK_UN`.
  func unlock() throws {
    _ = try retrying("flock", path) { flock(descriptor.rawValue, LOCK_UN) }
  }

  /// Takes (waiting) or releases a write lock on one byte far past any data, used as the per-object commit lock.
  /// It is independent of the `flock` in-use lock. On Linux it is an open-file-description lock, so two
  /// descriptors in one process exclude each other; elsewhere it is a POSIX record lock and callers also
  /// serialise commits within the process.
  ///
  /// The corresponding C function is `fcntl` with `F_OFD_SETLKW` (Linux) or `F_SETLKW`.
  func commitLock(_ acquire: Bool) throws {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("fcntl", path: path) }
    var request = flock()
    request.l_type = Int16(acquire ? F_WRLCK : F_UNLCK)
    request.l_whence = Int16(SEEK_SET)
    request.l_start = off_t(SystemFile.commitLockOffset)
    request.l_len = 1
    request.l_pid = 0
    #if os(Linux)
      let command: Int32 = 38  // F_OFD_SETLKW; glibc only exposes it under _GNU_SOURCE
    #else
      let command = F_SETLKW
    #endif
    _ = try retrying("fcntl", path) { fcntl(descriptor.rawValue, command, &request) }
  }

  /// The byte the commit lock covers: far beyond any object, so it never meets a data range.
  static let commitLockOffset: Int64 = 1 << 62
}

/// The parts of `stat` the cache uses.
struct FileStatus: Sendable, Equatable {
  var device: UInt64
  var inode: UInt64
  var size: Int64
  var allocatedBytes: Int64
  var modified: Double
  var isDirectory: Bool
  var isRegular: Bool

  init(_ info: stat) {
    device = UInt64(info.st_dev)
    inode = UInt64(info.st_ino)
    size = Int64(info.st_size)
    allocatedBytes = Int64(info.st_blocks) * 512
    #if canImport(Darwin)
      modified = Double(info.st_mtimespec.tv_sec) + Double(info.st_mtimespec.tv_nsec) / 1e9
    #else
      modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    #endif
    isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
    isRegular = (info.st_mode & S_IFMT) == S_IFREG
  }
}

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
    try retrying("open", path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
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

  /// Sets a file's access and modification times to now, without opening it for writing.
  ///
  /// The corresponding C function is `utimensat` (the path form of `futimens`).
  static func touch(_ path: String) throws {
    _ = try retrying("utimensat", path) { utimensat(AT_FDCWD, path, nil, 0) }
  }

  /// Sets a file's modification (and access) time to `seconds` since the epoch; used by tests and tools.
  ///
  /// The corresponding C function is `utimensat`.
  static func setModificationTime(_ path: String, seconds: Double) throws {
    let whole = Int(seconds.rounded(.down))
    let spec = timespec(tv_sec: whole, tv_nsec: Int((seconds - Double(whole)) * 1e9))
    var times = [spec, spec]
    _ = try retrying("utimensat", path) { utimensat(AT_FDCWD, path, &times, 0) }
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
private func systemClose(_ fd: Int32) -> Int32 {
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
