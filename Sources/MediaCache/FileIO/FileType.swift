#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What kind of entry a path names, as `lstat` sees it (a symlink is reported as one, never followed).
enum FileType: String, Sendable {
  case regularFile = "regular file"
  case directory
  case symlink = "symbolic link"
  case fifo = "FIFO"
  case socket
  case characterDevice = "character device"
  case blockDevice = "block device"
  case unknown = "file of unknown type"
}

extension FileSystemCalls {
  /// The type of the entry at `path` (not following a final symlink), or nil if nothing is there (or a
  /// component of the path is not a directory).
  ///
  /// The corresponding C function is `lstat`.
  static func fileType(_ path: String) throws -> FileType? {
    if BlockingCallCheck.isOn { BlockingCallCheck.check("lstat", path: path) }
    var info = stat()
    while lstat(path, &info) != 0 {
      let code = errno
      if code == EINTR { continue }
      if code == ENOENT || code == ENOTDIR { return nil }
      throw SystemCallError(syscall: "lstat", path: path, errno: .init(rawValue: code))
    }
    switch info.st_mode & S_IFMT {
    case S_IFREG: return .regularFile
    case S_IFDIR: return .directory
    case S_IFLNK: return .symlink
    case S_IFIFO: return .fifo
    case S_IFSOCK: return .socket
    case S_IFCHR: return .characterDevice
    case S_IFBLK: return .blockDevice
    default: return .unknown
    }
  }
}
