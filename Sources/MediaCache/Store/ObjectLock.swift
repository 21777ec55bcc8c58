/// The object-lock protocol, in one place: open an object's data file, take its `flock`, and make sure the path
/// still names the inode that was locked.
///
/// The data file's `flock` is the object's in-use lock. Every user holds it shared (a data manager while it is
/// open, the scrub while it reads); whoever deletes or repairs an object takes it exclusively without waiting
/// (removal, eviction, `cache-fsck`), so an object open anywhere is never deleted under its user. A remover
/// unlinks the manifest and then the data file while holding the lock, so whoever locks an inode must check
/// that the path still names it: if not, the object was removed (and perhaps created again) between the open
/// and the lock, and what it holds is a dead inode.
///
/// The same protocol is used by `FileHandleAssetDataManager` (shared, waiting), `ShardedStore.remove` and
/// `isBusy` (exclusive, not waiting), `ShardedStore.scrub` (shared, not waiting) and `CacheChecker`
/// (exclusive, not waiting).
enum ObjectLock {
  /// What an attempt to lock an object's data file found.
  enum Outcome {
    /// The lock is held through `file` (close it to let go); `status` is the locked inode's.
    case locked(SystemFile, status: FileStatus)
    /// There is no data file at the path.
    case missing
    /// Another open file description holds a conflicting lock (only when not waiting).
    case held
    /// The inode locked is no longer the one at the path: the object was removed (or replaced) meanwhile.
    case replaced
  }

  /// Opens the data file at `path` (a regular file only: see `SystemFile(path:writable:create:)`), takes its
  /// `flock` (`exclusive` or shared, waiting or not), and with `checkingInode` compares the locked inode with
  /// what the path names now. Throws what the open, lock or `fstat` throws other than ENOENT.
  static func acquire(
    _ path: String, writable: Bool, exclusive: Bool, wait: Bool, checkingInode: Bool = true
  ) throws -> Outcome {
    let file: SystemFile
    do {
      file = try SystemFile(path: path, writable: writable)
    } catch let error as SystemCallError where error.errno == .noSuchFileOrDirectory {
      return .missing
    }
    guard try file.lock(exclusive: exclusive, wait: wait) else {
      file.close()
      return .held
    }
    let locked = try file.status()
    if checkingInode {
      guard let current = try FileSystemCalls.status(path), current.inode == locked.inode,
        current.device == locked.device
      else {
        file.close()
        return .replaced
      }
    }
    return .locked(file, status: locked)
  }
}
