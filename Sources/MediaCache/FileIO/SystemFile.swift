import CResidentRead
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
func retrying(_ syscall: String, _ path: String, _ body: () -> Int32) throws -> Int32 {
  while true {
    let result = body()
    if result != -1 { return result }
    let code = errnoValue()
    if code == EINTR { continue }
    throw SystemCallError(syscall: syscall, path: path, errno: Errno(rawValue: code))
  }
}

@inline(__always)
func errnoValue() -> Int32 {
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
    let opened = try faultPoint(
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
    // Checked before the descriptor is stored: a refused one is closed there, and an instance that never
    // finished initialising has no deinit to close its number again (it may be another thread's file by then).
    try Self.requireRegularFile(opened.rawValue, path: path)
    descriptor = opened
    self.path = path
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
      throw StoreError.unexpectedFileType(
        path: FilePath(path), expected: "regular file", found: type.rawValue)
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

  /// Fills `buffer` from `offset` if every byte is in the page cache now, without waiting for the disk; false
  /// when some is not (or lies past the end of the file), or when this system has no such read. Not a blocking
  /// call: it may run on an event loop (so it skips the blocking-call check). An installed fault hook sees it as
  /// a read (`preadv2`); a fault it injects makes it return false.
  ///
  /// The corresponding C function is Linux's `preadv2` with `RWF_NOWAIT`.
  func readIfResident(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Bool {
    guard isOpen.load(ordering: .relaxed) else { return false }
    let read = { () -> Bool in
      var done = 0
      while done < buffer.count {
        let count = mediacache_pread_resident(
          self.descriptor.rawValue, buffer.baseAddress! + done, buffer.count - done, offset + Int64(done))
        if count <= 0 {
          if count < 0, errno == EINTR { continue }
          return false
        }
        done += Int(count)
      }
      return true
    }
    guard IOFaults.isActive else { return read() }
    let event = IOEvent(
      operation: .read, path: path, descriptor: descriptor.rawValue, offset: offset,
      length: Int64(buffer.count))
    return (try? IOFaults.intercept(event, syscall: "preadv2", read)) ?? false
  }

  /// Brings `range` into the page cache without copying it anywhere, so that a hole about to be written in
  /// small pieces gets the kernel's large folios: pages made by the writes themselves are as small as each write,
  /// and reading them later costs up to twice as much (docs/PERFORMANCE.md, "a cached object's pages in small
  /// folios"). Best effort: a failure changes nothing and is not reported; beyond the end of the file there is
  /// nothing to read.
  ///
  /// The corresponding C function is `sendfile` to `/dev/null` (Linux); elsewhere this does nothing.
  func warmPageCache(_ range: Range<Int64>) {
    #if canImport(Glibc)
      guard isOpen.load(ordering: .relaxed), let sink = Self.nullSink else { return }
      if BlockingCallCheck.isOn { BlockingCallCheck.check("sendfile", path: path) }
      var offset = off_t(range.lowerBound)
      var left = Int(range.count)
      while left > 0 {
        let sent = Glibc.sendfile(sink, descriptor.rawValue, &offset, left)
        if sent < 0, errno == EINTR { continue }
        guard sent > 0 else { return }
        left -= sent
      }
    #endif
  }

  #if canImport(Glibc)
    /// `/dev/null`, opened once for `warmPageCache` (nil if it cannot be).
    private static let nullSink: Int32? = {
      let fd = open("/dev/null", O_WRONLY | O_CLOEXEC)
      return fd >= 0 ? fd : nil
    }()
  #endif

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

  /// Frees the disk blocks of `range` (a hole reads as zeros), keeping the file's length; returns false where
  /// the file system cannot (`EOPNOTSUPP`): the bytes then stay allocated.
  ///
  /// The corresponding C function is `fallocate` with `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` (Linux),
  /// `fcntl` with `F_PUNCHHOLE` (Darwin), through `mediacache_punch_hole`.
  func deallocate(_ range: Range<Int64>) throws -> Bool {
    guard !range.isEmpty else { return true }
    let event = IOEvent(
      operation: .deallocate, path: path, descriptor: descriptor.rawValue, offset: range.lowerBound,
      length: Int64(range.count))
    return try faultPoint(event, syscall: "fallocate") {
      let result = mediacache_punch_hole(descriptor.rawValue, range.lowerBound, Int64(range.count))
      if result == 0 { return true }
      let code = errnoValue()
      if code == ENOTSUP { return false }
      throw SystemCallError(syscall: "fallocate", path: path, errno: Errno(rawValue: code))
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
