import Synchronization
import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

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
