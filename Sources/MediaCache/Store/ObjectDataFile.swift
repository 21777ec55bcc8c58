import Synchronization

/// The data file of an open object, held through its in-use lock (`ObjectLock`), and the identity of its inode.
///
/// A manager opens it at once, or, when it was opened with `deferringCreation` for an object that has no files
/// yet, leaves it to be made by its first user (the first write, a commit, a read, a reset): shard directories,
/// a file made in `tmp/`, locked and linked into place. A length recorded before that (`setSize`) is given to
/// the file as it is made. So the read engine's miss makes no file before its origin request, and usually not
/// before the head's job has handed the first bytes to the readers: that job's write makes it. (It used to be
/// made on the I/O executor right after the open, beside the origin request; on two cores the scheduler ran the
/// two on one core, one after the other, and the miss's first byte came 3-14% later: docs/PERFORMANCE.md.)
/// A close before any use
/// makes nothing, so no data file is left that nothing will ever write or commit. Until it exists the object
/// has no chunks (nothing wrote any) and no in-use lock (there is nothing to remove).
final class ObjectDataFile: Sendable {
  private enum State {
    /// Not made yet; `size`: the length it gets when it is made (`setSize`).
    case pending(size: Int64?)
    case open(SystemFile, FileIdentity)
    case closed
  }

  /// The file, when it was opened with the manager (no lock taken to use it).
  private let opened: (file: SystemFile, identity: FileIdentity)?
  /// The file's state, when its creation was deferred.
  private let deferred: Mutex<State>?
  private let objectID: ObjectID
  /// Creates the data file (locked): `lock`; nil for a file opened already.
  private let create: (@Sendable () throws -> (SystemFile, FileIdentity))?
  /// The store's `largestDeferredFileSize`: a larger length is applied at once (`setSize`).
  private let largestDeferredSize: Int64

  /// A data file opened already.
  private init(_ file: SystemFile, identity: FileIdentity, of id: ObjectID) {
    objectID = id
    opened = (file, identity)
    deferred = nil
    create = nil
    largestDeferredSize = 0
  }

  /// A data file that `create` makes when it is first needed.
  private init(
    of id: ObjectID, largestDeferredSize: Int64,
    deferredCreation create: @escaping @Sendable () throws -> (SystemFile, FileIdentity)
  ) {
    objectID = id
    opened = nil
    deferred = Mutex(.pending(size: nil))
    self.create = create
    self.largestDeferredSize = largestDeferredSize
  }

  /// Opens object `id`'s data file with its in-use lock (shared). A writer creates a missing one already
  /// locked: now, or with `deferringCreation` when it is first needed (see the type).
  static func open(_ id: ObjectID, in store: ShardedStore, writable: Bool, deferringCreation: Bool) throws
    -> ObjectDataFile
  {
    if let (file, identity) = try lock(id, in: store, writable: writable, creating: !deferringCreation) {
      return ObjectDataFile(file, identity: identity, of: id)
    }
    // No data file (so no chunks): made by its first user.
    return ObjectDataFile(of: id, largestDeferredSize: store.largestDeferredFileSize) {
      guard let made = try lock(id, in: store, writable: true, creating: true) else {
        throw StoreError.busy(id)
      }
      return made
    }
  }

  /// Takes the object's in-use lock, shared: `ObjectLock`, again while the object is removed between the open
  /// and the lock; a writer creates a missing data file already locked (`creating`; else nil for it).
  private static func lock(_ id: ObjectID, in store: ShardedStore, writable: Bool, creating: Bool) throws -> (
    SystemFile, FileIdentity
  )? {
    let path = store.paths(for: id).data
    for _ in 0..<64 {
      switch try mapIO({ try ObjectLock.acquire(path, writable: writable, exclusive: false, wait: true) }) {
      case .locked(let file, let status):
        return (file, FileIdentity(device: status.device, inode: status.inode))
      case .missing where !writable, .replaced where !writable:
        throw StoreError.notFound(id)
      case .missing where !creating:
        return nil
      case .missing:
        // A new object: its data file appears already locked (see `createLockedDataFile`). Its name, and those
        // of shard directories made for it, are flushed before the first commit (`CommitScheduler
        // .syncNameOnce`), not here: a miss's first bytes do not wait for three directory flushes.
        try store.ensureShard(for: id, syncingNewDirectories: false)
        guard let created = try store.createLockedDataFile(for: id) else { continue }
        let status = try mapIO { try created.status() }
        return (created, FileIdentity(device: status.device, inode: status.inode))
      case .replaced, .held:
        continue  // removed (or replaced) between the open and the lock: again
      }
    }
    throw StoreError.busy(id)
  }

  /// The open file, created first if it was not yet (blocking: on the I/O executor or a thread that may block).
  /// Throws what the creation throws (it is tried again at the next use), or `StoreError.closed` after `close`.
  var handle: SystemFile {
    get throws { try resolved().file }
  }

  /// The open file and its inode's identity if the file exists now; nil while its creation is due or being
  /// made. Never waits (it may be asked where nothing may block: the creation holds the lock across its
  /// system calls).
  var ifMade: (file: SystemFile, identity: FileIdentity)? {
    if let opened { return opened }
    return deferred!.withLockIfAvailable { state -> (SystemFile, FileIdentity)? in
      if case .open(let file, let identity) = state { (file, identity) } else { nil }
    } ?? nil
  }

  /// The identity of the data file's inode (names its chunks in `VerifiedChunkCache`); creates it as `handle`.
  var identity: FileIdentity {
    get throws { try resolved().identity }
  }

  private func resolved() throws -> (file: SystemFile, identity: FileIdentity) {
    if let opened { return opened }
    // The creation's calls run under this lock: only this object's first users wait for it, and they need
    // the file it makes.
    return try deferred!.withLock { state in
      switch state {
      case .open(let file, let identity): return (file, identity)
      case .closed: throw StoreError.closed(objectID)
      case .pending(let size):
        let (file, identity) = try create!()
        if let size {
          do {
            try mapIO { try file.truncate(to: size) }
          } catch {
            // Closed again, its lock released, the state left pending: the next use opens the file made here
            // and sizes it. With none, the file stays, empty and without a manifest (`cache-fsck` reports it
            // as `orphan-data` until the compactor's next pass removes it). A length the file system cannot
            // hold is applied at once instead (`ShardedStore.largestDeferredFileSize`), so a failing disk, mostly.
            file.close()
            throw error
          }
        }
        state = .open(file, identity)
        return (file, identity)
      }
    }
  }

  /// Makes the file `size` bytes long (a new object's length: a sparse file): now if it exists, else when it
  /// is made, so recording a miss's length makes no file (see the type; over the store's
  /// `largestDeferredFileSize`, now).
  /// Blocking (the file's `fstat` and `ftruncate`, or a creation by another thread in progress). Throws what
  /// those throw, or `StoreError.closed` after `close`.
  func setSize(_ size: Int64) throws {
    if opened == nil, size <= largestDeferredSize {
      let recorded = try deferred!.withLock { state -> Bool in
        switch state {
        case .pending:
          state = .pending(size: size)
          return true
        case .closed: throw StoreError.closed(objectID)
        case .open: return false
        }
      }
      if recorded { return }
    }
    let file = try mapIO { try handle }
    if try mapIO({ try file.status().size }) != size { try mapIO { try file.truncate(to: size) } }
  }

  /// Closes the file (releasing the in-use lock); a creation not made yet will not be. Returns whether there
  /// was a file (opened, or created since), for a close that removes one nobody committed a manifest for.
  @discardableResult
  func close() -> Bool {
    if let opened {
      opened.file.close()
      return true
    }
    return deferred!.withLock { state in
      defer { state = .closed }
      guard case .open(let file, _) = state else { return false }
      file.close()
      return true
    }
  }
}
