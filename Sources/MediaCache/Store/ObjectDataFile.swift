import Synchronization

/// The data file of an open object, held through its in-use lock (`ObjectLock`), and the identity of its inode.
///
/// A manager opens it at once, or, when it was opened with `deferringCreation` for an object that has no files
/// yet, creates it on a thread of `IOExecutor.shared` right after the open (shard directories, a file made in
/// `tmp/`, locked and linked into place), so that the read engine's origin request for a new object goes out
/// while that happens instead of after it. Whatever needs the file first (the first write, a length, a commit)
/// waits for that creation or makes it itself; a close before it drops it, so no data file is left that nothing
/// will ever write or commit. Until it exists the object has no chunks (nothing wrote any) and no in-use lock
/// (there is nothing to remove).
final class ObjectDataFile: Sendable {
  private enum State {
    case pending
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

  /// A data file opened already.
  private init(_ file: SystemFile, identity: FileIdentity, of id: ObjectID) {
    objectID = id
    opened = (file, identity)
    deferred = nil
    create = nil
  }

  /// A data file that `create` makes when it is first needed, started now on the I/O executor. The job holds
  /// no reference to the file: a manager released before it runs creates nothing.
  private init(
    of id: ObjectID, deferredCreation create: @escaping @Sendable () throws -> (SystemFile, FileIdentity)
  ) {
    objectID = id
    opened = nil
    deferred = Mutex(.pending)
    self.create = create
    IOExecutor.shared.submit { [weak self] in _ = try? self?.resolved() }
  }

  /// Opens object `id`'s data file with its in-use lock (shared). A writer creates a missing one already
  /// locked: now, or with `deferringCreation` on the I/O executor right after this returns (see the type).
  static func open(_ id: ObjectID, in store: ShardedStore, writable: Bool, deferringCreation: Bool) throws
    -> ObjectDataFile
  {
    if let (file, identity) = try lock(id, in: store, writable: writable, creating: !deferringCreation) {
      return ObjectDataFile(file, identity: identity, of: id)
    }
    // No data file (so no chunks): made on the executor now, or by its first user.
    return ObjectDataFile(of: id) {
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

  /// The open file if it exists now; nil while its creation is due or being made. Never waits (it may be asked
  /// where nothing may block: the creation holds the lock across its system calls).
  var handleIfMade: SystemFile? {
    if let opened { return opened.file }
    return deferred!.withLockIfAvailable { if case .open(let file, _) = $0 { file } else { nil } } ?? nil
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
      case .pending:
        let (file, identity) = try create!()
        state = .open(file, identity)
        return (file, identity)
      }
    }
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
