import Foundation

/// Reads and writes one cached object by byte range, straight between the caller's buffers and the object's
/// data file, so an object of any size is handled in chunk-sized pieces and never sits in memory.
///
/// While open it holds a shared `flock` on the data file (`ObjectLock`): no process evicts or repairs the
/// object under it. (A manager the read engine opened for a new object, with `deferringCreation`, holds it
/// from when its first write or commit makes the file: until then there is nothing to evict, and a removal
/// finds nothing to remove.) A chunk becomes
/// present only when all its bytes are on disk and its CRC-32 has been computed from them; present chunks
/// reach the manifest in batches (`CommitPolicy`) and on `flush()`/`close()`, merged with what other writers
/// committed. Every chunk's CRC is verified before any of its bytes is returned.
///
/// A batch due while writing is committed on a background queue (in the durable mode: flush the data file,
/// then replace the manifest), so the writer goes on writing the next chunks while the disk catches up; at
/// most one batch is in flight, and a writer that gets `CommitPolicy.maxBacklog` ahead of it waits.
/// `flush()`, `close()` and `reset` first wait for the batch in flight and then commit the rest themselves.
/// A background commit that fails is reported by the next `write`, `flush` or `close`.
///
/// The handle is thin: `ObjectWriter` writes (and `CommitScheduler` decides when to commit),
/// `VerifiedChunkReader` reads, and `ObjectView` is what they share. Reads never wait for the disk on a
/// writer's behalf: the writer's lock is held across `pwrite`, `fsync` and commits, the view's (all a reader
/// takes) across no system call. Every method blocks its caller on the disk: async code calls them through
/// `IOExecutor.shared`.
///
/// **Close what you open**: `close()` commits what is pending and releases the lock; `withAssetData` does it
/// for a scope. A handle released without `close()` commits nothing (its deinitialiser may run on any thread,
/// an event loop included, where a commit's `fsync` must not run): the descriptor is closed, which releases
/// the lock, and chunks completed since the last commit are not listed (they are fetched again when needed).
///
/// Moving bytes uses positional `pread`/`pwrite` on the descriptor (swift-system), not `FileHandle`'s
/// stream methods: see the note in `docs/FORMAT.md` and the benchmark `mediacache-bench fileio`.
public final class FileHandleAssetDataManager: Sendable {
  /// When pending chunks are committed to the manifest.
  public struct CommitPolicy: Sendable {
    /// Commit once this many bytes of newly completed chunks are pending.
    public var bytes: Int64
    /// Commit pending chunks at the first write after this long.
    public var interval: Duration
    /// How many bytes of completed chunks may wait while a background commit is in flight before a writer
    /// waits for it (bounds what a crash can lose to about this much plus one batch).
    public var maxBacklog: Int64

    /// A policy that commits every `bytes` bytes of completed chunks (default 8 MiB) or every `interval`
    /// (default 2 seconds), whichever comes first. `maxBacklog` (bytes) defaults to four batches, and at least
    /// 32 MiB.
    public init(bytes: Int64 = 8 << 20, interval: Duration = .seconds(2), maxBacklog: Int64? = nil) {
      self.bytes = bytes
      self.interval = interval
      self.maxBacklog = maxBacklog ?? max(4 * bytes, 32 << 20)
    }
  }

  /// Callbacks for the owner of a manager (the `MediaCache` facade uses them for size tracking and events).
  /// They run on the calling thread while the manager is busy: they must not call back into it.
  public struct Observer: Sendable {
    /// A chunk of this many bytes became present.
    public var chunkCompleted: (@Sendable (Int64) -> Void)?
    /// These chunks failed their CRC and were dropped.
    public var chunksDropped: (@Sendable (ObjectID, Int) -> Void)?

    /// Callbacks to call; nil for the events the owner does not need.
    public init(
      chunkCompleted: (@Sendable (Int64) -> Void)? = nil,
      chunksDropped: (@Sendable (ObjectID, Int) -> Void)? = nil
    ) {
      self.chunkCompleted = chunkCompleted
      self.chunksDropped = chunksDropped
    }
  }

  /// The object this manager reads and writes.
  public let objectID: ObjectID
  /// Whether the manager may write.
  public let isWritable: Bool
  let store: ShardedStore
  private let view: ObjectView
  private let writer: ObjectWriter
  let reader: VerifiedChunkReader

  // MARK: Opening

  /// Opens object `id` of `store`. A writable manager creates the data file if needed; a read-only one throws
  /// `StoreError.notFound` when the object has no manifest. A manifest that cannot be read is treated as
  /// absent by a writer (it will be replaced) and reported as `StoreError.corruptManifest` to a reader.
  /// (Callers outside the package open one with `MediaCache.assetDataManager(for:writable:)`.)
  ///
  /// With `deferringCreation`, a writable manager of an object that has no files yet returns without creating
  /// its data file: whatever needs the file first (a write, a commit, a read) makes it, and a length set before
  /// that is given to it as it is made (`ObjectDataFile`). The read engine opens new objects so: a miss's origin
  /// request, and usually the hand-over of its first bytes to the readers, come before the shard directories and
  /// the file are made (by the head's write).
  package init(
    store: ShardedStore, id: ObjectID, writable: Bool = true, commitPolicy: CommitPolicy = CommitPolicy(),
    observer: Observer = Observer(), deferringCreation: Bool = false
  ) throws {
    self.store = store
    self.objectID = id
    self.isWritable = writable
    if !writable, try store.readManifest(id) == nil { throw StoreError.notFound(id) }
    // The shard directories are made only if the data file is missing (below); what exists is checked first.
    if writable { try store.checkFileTypes(of: id) }
    let file = try ObjectDataFile.open(
      id, in: store, writable: writable, deferringCreation: deferringCreation)
    var manifest: Manifest
    var onDisk = false
    do {
      // The object's file types were checked above (a reader's by its first `readManifest`).
      let found = try store.readManifest(id, checkingFileTypes: false)
      onDisk = found != nil
      // A manifest without its data file (damage: it lists chunks that are not there) gets its file now, as
      // without `deferringCreation`, so its chunks are read (and fail their check) like any other's.
      if found != nil, deferringCreation { _ = try file.handle }
      manifest = found ?? Manifest(objectID: id, chunkSize: store.chunkSize)
    } catch let error as StoreError {
      guard writable, error.code == .corruptManifest else {
        file.close()
        throw error
      }
      manifest = Manifest(objectID: id, chunkSize: store.chunkSize)
    }
    view = ObjectView(objectID: id, manifest: manifest, onDisk: onDisk)
    writer = ObjectWriter(
      objectID: id, isWritable: writable, store: store, file: file, view: view,
      scheduler: CommitScheduler(policy: commitPolicy), observer: observer)
    reader = VerifiedChunkReader(objectID: id, store: store, file: file, view: view, writer: writer)
    // (Not for a new object: it has no manifest to stamp yet; its first commit makes one, with a new time.)
    reader.noteAccess()
  }

  /// Opens object `id`, runs `body` with the manager, and closes it (committing) whether `body` returns or
  /// throws; an error from `body` wins over one from closing.
  package static func withAssetData<Result>(
    store: ShardedStore, id: ObjectID, writable: Bool = true, commitPolicy: CommitPolicy = CommitPolicy(),
    observer: Observer = Observer(), _ body: (FileHandleAssetDataManager) throws -> Result
  ) throws -> Result {
    try using(
      FileHandleAssetDataManager(
        store: store, id: id, writable: writable, commitPolicy: commitPolicy, observer: observer), body)
  }

  /// Runs `body` with `manager`, then closes it whether `body` returns or throws (an error from `body` wins).
  static func using<Result>(
    _ manager: FileHandleAssetDataManager, _ body: (FileHandleAssetDataManager) throws -> Result
  ) throws -> Result {
    let result: Result
    do {
      result = try body(manager)
    } catch {
      try? manager.close()
      throw error
    }
    try manager.close()
    return result
  }

  // MARK: What is known

  /// The manager's current view of the manifest: what was committed when it last read or wrote the manifest,
  /// plus the chunks it completed since.
  public var manifest: Manifest { view.manifest }

  /// The object's chunk size (fixed for its life).
  var chunkSize: Int { view.withLock { $0.manifest.chunkSize } }

  /// The object's length, once known.
  public var contentLength: Int64? { view.withLock { $0.manifest.contentLength } }

  /// Re-reads the committed manifest so chunks other writers committed become readable here.
  public func refresh() throws {
    try view.withLock { try view.ensureOpen($0) }
    // Chunks another writer committed are read from the data file: made now if its creation is still due.
    _ = try writer.file.handle
    try view.refresh(from: store)
  }

  // MARK: Writing

  /// Writes `bytes` at `offset`. Bytes of chunks already present are not rewritten (they were verified).
  ///
  /// Throws `StoreError.outOfBounds` past a known length, `StoreError.io` if the disk refuses.
  public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
    try writer.write(bytes, at: offset, ifVersion: nil)
  }

  /// Writes `bytes` at `offset` only if the object is still at version `versionTag` (see `Manifest.versionTag`):
  /// a fetch that started before a `reset` must not write bytes of the old version into the new one. Throws
  /// `StoreError.versionChanged` otherwise.
  public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, ifVersion versionTag: UInt32?) throws {
    try writer.write(bytes, at: offset, ifVersion: versionTag)
  }

  /// Writes `data` at `offset` (bytes from the start of the object), as `write(_:at:)` with a buffer does;
  /// throws the same errors.
  public func write(_ data: some ContiguousBytes, at offset: Int64) throws {
    try data.withUnsafeBytes { try writer.write($0, at: offset, ifVersion: nil) }
  }

  /// Records the object's total length and sizes the (sparse) data file to it. A short last chunk that is
  /// already written becomes present. Throws `StoreError.lengthConflict` if another length is recorded, and
  /// `StoreError.outOfBounds` if bytes were already written past it.
  ///
  /// With `versionTag`, only if the object is still at that version (see `write(_:at:ifVersion:)`); throws
  /// `StoreError.versionChanged` otherwise. So do the other setters that take it.
  public func setContentLength(_ length: Int64, ifVersion versionTag: UInt32? = nil) throws {
    try writer.setContentLength(length, ifVersion: versionTag)
  }

  /// Records the origin's validators where none are recorded yet (committed with the next batch). Different
  /// validators mean a different version: use `reset` for that.
  public func setValidators(etag: String?, lastModified: String?, ifVersion versionTag: UInt32? = nil) throws
  {
    try writer.setMetadata(ifVersion: versionTag) { manifest, pending in
      if manifest.etag == nil, let etag {
        manifest.etag = etag
        pending.etag = etag
      }
      if manifest.lastModified == nil, let lastModified {
        manifest.lastModified = lastModified
        pending.lastModified = lastModified
      }
    }
  }

  /// Sets the content type recorded in the manifest (committed with the next batch).
  public func setContentType(_ contentType: String?, ifVersion versionTag: UInt32? = nil) throws {
    if let contentType, contentType.utf8.count > Manifest.maxContentTypeBytes {
      throw StoreError.fieldTooLarge(
        field: "content type", size: contentType.utf8.count, limit: Manifest.maxContentTypeBytes)
    }
    try writer.setMetadata(ifVersion: versionTag) { manifest, pending in
      manifest.contentType = contentType
      pending.contentType = contentType ?? ""
    }
  }

  /// Puts the object in `group` (nil: in none), so `MediaCache.remove(group:)` removes it with the group's
  /// other objects. Commits at once: the group index entry is written first, then the manifest, then the entry
  /// of a group the object leaves is removed (so a crash leaves at worst an extra entry, which the group's
  /// removal and `cache-fsck --repair` drop). Throws `StoreError.invalidGroup` for an empty name or one with a
  /// control character, `StoreError.fieldTooLarge` for one over `Manifest.maxGroupBytes`.
  public func setGroup(_ group: String?) throws {
    if let group {
      try GroupName.validated(group)
      try store.addGroupEntry(objectID, group: group)
    }
    let previous = manifest.group
    try writer.setMetadata { manifest, pending in
      manifest.group = group
      pending.group = group ?? ""
    }
    try flush()
    if let previous, previous != group { try store.removeGroupEntry(objectID, group: previous) }
  }

  /// Sets the app's own metadata for this object (at most `Manifest.maxUserMetadataBytes`).
  public func setUserMetadata(_ metadata: Data) throws {
    guard metadata.count <= Manifest.maxUserMetadataBytes else {
      throw StoreError.fieldTooLarge(
        field: "user metadata", size: metadata.count, limit: Manifest.maxUserMetadataBytes)
    }
    try writer.setMetadata { manifest, pending in
      manifest.userMetadata = metadata
      pending.userMetadata = metadata
    }
  }

  /// Records the origin response's header fields and when it arrived (committed with the next batch): the
  /// response that stored the object, or a `304` that revalidated it. They replace the recorded ones.
  public func setStoredHeaders(_ headers: StoredHeaders, ifVersion versionTag: UInt32? = nil) throws {
    try writer.setMetadata(ifVersion: versionTag) { manifest, pending in
      manifest.storedHeaders = headers
      pending.storedHeaders = headers
    }
  }

  /// Pins or unpins the object: a pinned object is never evicted.
  public func setPinned(_ pinned: Bool) throws {
    try writer.setMetadata { manifest, pending in
      manifest.isPinned = pinned
      pending.isPinned = pinned
    }
  }

  /// Starts a new version of the object (the origin's bytes changed): every chunk is forgotten, here and — at
  /// the next commit — on disk, and the new validators and length are recorded. Bytes of two versions are
  /// never mixed. Returns the new version's tag (`Manifest.versionTag`).
  ///
  /// With `versionTag`, only if the object is still at that version (another reset may have started a newer
  /// one meanwhile: see `write(_:at:ifVersion:)`); throws `StoreError.versionChanged` otherwise.
  @discardableResult
  public func reset(
    contentLength: Int64?, etag: String?, lastModified: String?, ifVersion versionTag: UInt32? = nil
  ) throws -> UInt32 {
    try writer.reset(
      contentLength: contentLength, etag: etag, lastModified: lastModified, ifVersion: versionTag)
  }

  /// Commits every completed chunk now.
  public func flush() throws {
    try writer.flush()
  }

  /// Commits, releases the in-use lock and closes the data file. Later calls throw `StoreError.closed`;
  /// a second `close()` does nothing.
  public func close() throws {
    try writer.close()
  }

  // MARK: Reading

  /// The bytes of `range`, every chunk CRC-verified. For small ranges; use `bytes(in:)` for large ones.
  ///
  /// A chunk is read and checked whole the first time (its first and last chunks are then kept in memory for a
  /// while, `VerifiedChunkCache`); later reads of a chunk between them read and check only the 16 KiB blocks
  /// that hold the range, against the block CRCs kept when it was checked whole (`BlockCRCTable`).
  ///
  /// Throws `StoreError.notCached` (with the missing ranges) if any byte is not cached,
  /// `StoreError.outOfBounds` past a known length, `StoreError.corruptChunk` if a chunk fails its CRC (the chunk
  /// is dropped from the manifest so it can be fetched again).
  public func read(_ range: Range<Int64>) throws -> Data {
    try reader.read(range)
  }

  /// The bytes of the whole chunks that hold `range` (not empty), from the first one's start to the last
  /// one's end: the most a `readVerified(_:into:)` of `range` reads (a plan by blocks reads less).
  package func wholeChunkExtent(of range: Range<Int64>) -> Range<Int64> {
    reader.wholeChunkExtent(of: range)
  }

  /// Plans a verified read of `range` (not empty): which bytes of the chunks holding it are read, and checked
  /// how (whole chunks against their manifest CRCs, or 16 KiB blocks against the CRCs kept when their chunk
  /// was last verified whole; the span holding them, whole, for bytes of an incomplete chunk). Throws as
  /// `read(_:)` does when a byte is not cached. May read the manifest from disk (when the object's view lacks
  /// bytes another process may have committed), unless `readingManifest` is false: then it makes no system
  /// call and throws `notCached` instead.
  package func planVerifiedRead(_ range: Range<Int64>, readingManifest: Bool = true) throws
    -> VerifiedReadPlan
  {
    try reader.planVerifiedRead(range, readingManifest: readingManifest)
  }

  /// Reads what `plan` says into `buffer` (at least `plan.extent.count` bytes) and checks it there: no byte is
  /// copied after the read, so a server sends a slice of the buffer it passed (`plan.offset`,
  /// `plan.range.count`). A chunk that fails (whole or a block of it) is dropped and `StoreError.corruptChunk`
  /// thrown; `closed` or `io` as `read(_:)` throws them. Blocks on the disk.
  package func readVerified(_ plan: VerifiedReadPlan, into buffer: UnsafeMutableRawBufferPointer) throws {
    try reader.readVerified(plan, into: buffer)
  }

  /// Readies the page cache for writes into chunk `index` before they come: its range is read into the page
  /// cache (copied nowhere), so a hole there gets the kernel's large folios instead of pages as small as each
  /// write, which makes every later read of the chunk cheaper (`SystemFile.warmPageCache`). Meant to be called
  /// ahead of the writes, off their path (it blocks on the disk like a read). Best effort, never throws; does
  /// nothing for a chunk that is present or holds spans (its bytes may be on disk: nothing to gain, a read to
  /// pay), for a read-only or closed handle, or off Linux. A new object's data file not made yet is made here
  /// (`deferringCreation`), as the write would make it.
  package func prepareForWriting(chunk index: Int) { writer.prepareForWriting(chunk: index) }

  /// `readVerified(_:into:)` when every byte `plan` reads is in the page cache now, without waiting for the disk
  /// or making any blocking call (Linux's `preadv2` with `RWF_NOWAIT`), so it may run on an event loop. False
  /// when that cannot be done, with nothing changed: a byte not resident, no such read on this system, the
  /// handle closed, or a chunk or block that fails its CRC (left for `readVerified(_:into:)`, which drops it).
  package func readVerifiedIfResident(_ plan: VerifiedReadPlan, into buffer: UnsafeMutableRawBufferPointer)
    -> Bool
  {
    reader.readVerifiedIfResident(plan, into: buffer)
  }

  /// The bytes of `range` as chunk-sized pieces, read and verified one at a time as the sequence is iterated,
  /// so memory stays at about one chunk whatever the range. A missing or corrupt chunk ends the sequence with
  /// the same errors as `read(_:)`, after the good pieces before it.
  public func bytes(in range: Range<Int64>) -> ChunkReadSequence {
    ChunkReadSequence(manager: self, range: range)
  }
}
