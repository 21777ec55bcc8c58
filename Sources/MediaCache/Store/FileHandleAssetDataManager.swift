import Foundation
import Synchronization

/// Reads and writes one cached object by byte range, straight between the caller's buffers and the object's
/// data file, so an object of any size is handled in chunk-sized pieces and never sits in memory.
///
/// While open it holds a shared `flock` on the data file: no process evicts or repairs the object under it.
/// A chunk becomes present only when all its bytes are on disk and its CRC-32 has been computed from them;
/// present chunks reach the manifest in batches (`CommitPolicy`) and on `flush()`/`close()`, merged with what
/// other writers committed. Every chunk's CRC is verified before any of its bytes is returned.
///
/// A batch due while writing is committed on a background queue (in the durable mode: flush the data file,
/// then replace the manifest), so the writer goes on writing the next chunks while the disk catches up; at
/// most one batch is in flight, and a writer that gets `CommitPolicy.maxBacklog` ahead of it waits.
/// `flush()`, `close()` and `reset` first wait for the batch in flight and then commit the rest themselves.
/// A background commit that fails is reported by the next `write`, `flush` or `close`.
///
/// Reads of present chunks (the `pread` and the CRC check) run without the manager's lock, so any number of
/// threads read one object at once; writes and commits take it. Every method blocks its caller on the disk:
/// async code calls them through `IOExecutor.shared`.
///
/// Moving bytes uses positional `pread`/`pwrite` on the descriptor (swift-system), not `FileHandle`'s
/// stream methods: see the note in `docs/FORMAT.md` and the benchmark `mediacache-bench fileio`.
public final class FileHandleAssetDataManager: Sendable {
  /// When pending chunks are committed to the manifest.
  public struct CommitPolicy: Sendable {
    /// Commit once this many bytes of newly completed chunks are pending.
    public var bytes: Int64
    /// Commit pending chunks at the first write after this many seconds.
    public var interval: Double
    /// How many bytes of completed chunks may wait while a background commit is in flight before a writer
    /// waits for it (bounds what a crash can lose to about this much plus one batch).
    public var maxBacklog: Int64

    public init(bytes: Int64 = 8 << 20, interval: Double = 2, maxBacklog: Int64? = nil) {
      self.bytes = bytes
      self.interval = interval
      self.maxBacklog = maxBacklog ?? max(4 * bytes, 32 << 20)
    }
  }

  /// The object this manager reads and writes.
  public let objectID: ObjectID
  /// Whether the manager may write.
  public let isWritable: Bool
  let store: ShardedStore
  private let file: SystemFile
  /// The data file this manager opened (names it in `VerifiedChunkCache`, whatever store it is in).
  private let fileIdentity: FileIdentity
  private let policy: CommitPolicy
  private let state: Mutex<State>
  private let observer: Observer
  /// Durable mode: whether this manager has flushed the shard directories since it opened the data file. A
  /// file this process or another created may not have its name on disk yet, nor the shard directories made
  /// for it, and a manifest listing its chunks must not outlive them (power lost after the manifest's rename
  /// but before those names reached the disk). So the first commit that adds chunks flushes objects/ab/cd,
  /// objects/ab and objects first; later ones need not.
  private let nameSynced = Atomic<Bool>(false)
  /// Chunk reads running without the state lock (`verifiedChunkData`): `close` waits for them before it closes
  /// the descriptor they read through.
  private let readsInFlight = Atomic<Int>(0)

  /// Callbacks for the owner of a manager (the `MediaCache` facade uses them for size tracking and events).
  /// They run on the calling thread while the manager is busy: they must not call back into it.
  public struct Observer: Sendable {
    /// A chunk of this many bytes became present.
    public var chunkCompleted: (@Sendable (Int64) -> Void)?
    /// These chunks failed their CRC and were dropped.
    public var chunksDropped: (@Sendable (ObjectID, Int) -> Void)?

    public init(
      chunkCompleted: (@Sendable (Int64) -> Void)? = nil,
      chunksDropped: (@Sendable (ObjectID, Int) -> Void)? = nil
    ) {
      self.chunkCompleted = chunkCompleted
      self.chunksDropped = chunksDropped
    }
  }

  private struct State {
    var manifest: Manifest
    var pending = ManifestChange()
    var partial: [Int: PartialChunk] = [:]
    var uncommittedBytes: Int64 = 0
    var lastCommit = Date().timeIntervalSince1970
    var closed = false
    /// The batch being committed on `commitQueue`, if any.
    var inFlight: ManifestChange?
    var commitInFlight: Bool { inFlight != nil }
    /// Commits made by the calling threads (a background result older than one of them is not adopted).
    var foregroundCommits = 0
    /// What the last background commit threw, until a caller is told.
    var backgroundError: (any Error)?
  }

  /// Where batches due while writing are committed (see the type's documentation).
  private static let commitQueue = DispatchQueue(
    label: "MediaCache.commit", qos: .utility, attributes: .concurrent)
  /// Entered while a background commit is in flight.
  private let backgroundCommit = DispatchGroup()

  // MARK: Opening

  /// Opens object `id` of `store`. A writable manager creates the data file if needed; a read-only one throws
  /// `StoreError.notFound` when the object has no manifest. A manifest that cannot be read is treated as
  /// absent by a writer (it will be replaced) and reported as `StoreError.corruptManifest` to a reader.
  public init(
    store: ShardedStore, id: ObjectID, writable: Bool = true, commitPolicy: CommitPolicy = CommitPolicy(),
    observer: Observer = Observer()
  ) throws {
    self.observer = observer
    self.store = store
    self.objectID = id
    self.isWritable = writable
    self.policy = commitPolicy
    let paths = store.paths(for: id)
    if !writable, try store.readManifest(id) == nil { throw StoreError.notFound(id) }
    // The shard directories are made only if the data file is missing (below); what exists is checked first.
    if writable { try store.checkFileTypes(of: id) }
    // Take the in-use lock, then make sure the path still names the inode we locked: an evictor may have
    // unlinked it between our open and our lock.
    var opened: SystemFile?
    var fileIdentity: FileIdentity?
    for _ in 0..<64 {
      switch try mapIO({
        try ObjectLock.acquire(paths.data, writable: writable, exclusive: false, wait: true)
      }) {
      case .locked(let file, let status):
        opened = file
        fileIdentity = FileIdentity(device: status.device, inode: status.inode)
      case .missing where !writable, .replaced where !writable:
        throw StoreError.notFound(id)
      case .missing:
        // A new object: its data file appears already locked (see `createLockedDataFile`).
        // Its name, and those of shard directories made for it, are flushed before the first commit (see
        // `syncNameOnce`), not here: a miss's first bytes do not wait for three directory flushes.
        try store.ensureShard(for: id, syncingNewDirectories: false)
        guard let created = try store.createLockedDataFile(for: id) else { continue }
        let status = try mapIO { try created.status() }
        opened = created
        fileIdentity = FileIdentity(device: status.device, inode: status.inode)
      case .replaced, .held:
        continue  // removed (or replaced) between our open and our lock: try again
      }
      break
    }
    guard let opened, let fileIdentity else { throw StoreError.busy(id) }
    self.file = opened
    self.fileIdentity = fileIdentity
    var manifest: Manifest
    do {
      // The object's file types were checked above (a reader's by its first `readManifest`).
      manifest =
        try store.readManifest(id, checkingFileTypes: false)
        ?? Manifest(objectID: id, chunkSize: store.chunkSize)
    } catch let error as StoreError {
      guard writable, case .corruptManifest = error else {
        opened.close()
        throw error
      }
      manifest = Manifest(objectID: id, chunkSize: store.chunkSize)
    }
    state = Mutex(State(manifest: manifest))
    store.noteAccess(id)
  }

  deinit {
    state.withLock { state in
      if !state.closed { try? closeLocked(&state) }
    }
  }

  // MARK: What is known

  /// The manager's current view of the manifest: what was committed when it last read or wrote the manifest,
  /// plus the chunks it completed since.
  public var manifest: Manifest { state.withLock { $0.manifest } }

  /// The object's length, once known.
  public var contentLength: Int64? { state.withLock { $0.manifest.contentLength } }

  /// Re-reads the committed manifest so chunks other writers committed become readable here.
  public func refresh() throws {
    try state.withLock { state in
      try ensureOpen(state)
      try refreshLocked(&state)
    }
  }

  // MARK: Writing

  /// Writes `bytes` at `offset`. Bytes of chunks already present are not rewritten (they were verified).
  ///
  /// Throws `StoreError.outOfBounds` past a known length, `StoreError.io` if the disk refuses.
  public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
    try write(bytes, at: offset, ifVersion: nil)
  }

  /// Writes `bytes` at `offset` only if the object is still at version `versionTag` (see `Manifest.versionTag`):
  /// a fetch that started before a `reset` must not write bytes of the old version into the new one. Throws
  /// `StoreError.versionChanged` otherwise.
  public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, ifVersion versionTag: UInt32?) throws {
    let mustWait = try state.withLock { state -> Bool in
      try ensureWritable(state)
      try reportBackgroundError(&state)
      if let versionTag, state.manifest.versionTag != versionTag {
        throw StoreError.versionChanged(objectID, expected: versionTag, current: state.manifest.versionTag)
      }
      let end = offset + Int64(bytes.count)
      guard offset >= 0, end <= Manifest.maxLength(chunkSize: state.manifest.chunkSize),
        state.manifest.contentLength.map({ end <= $0 }) ?? true
      else {
        throw StoreError.outOfBounds(
          objectID, range: offset..<max(offset, end), length: state.manifest.contentLength)
      }
      let chunkSize = Int64(state.manifest.chunkSize)
      var cursor = offset
      while cursor < end {
        let index = Int(cursor / chunkSize)
        let chunkStart = Int64(index) * chunkSize
        let pieceEnd = min(end, chunkStart + chunkSize)
        defer { cursor = pieceEnd }
        if state.manifest.isPresent(index) { continue }
        let piece = UnsafeRawBufferPointer(
          rebasing: bytes[Int(cursor - offset)..<Int(pieceEnd - offset)])
        try mapIO { try file.write(piece, at: cursor) }
        state.partial[index, default: PartialChunk()].add(
          (cursor - chunkStart)..<(pieceEnd - chunkStart), crc: CRC32.checksum(piece))
        try completeIfCovered(index, &state)
      }
      return try commitIfDue(&state)
    }
    if mustWait {
      // Too far ahead of the disk: wait for the batch in flight, then hand over the backlog.
      backgroundCommit.wait()
      try state.withLock { state in
        try ensureOpen(state)
        try reportBackgroundError(&state)
        _ = try commitIfDue(&state)
      }
    }
  }

  /// Writes `data` at `offset`.
  public func write(_ data: some ContiguousBytes, at offset: Int64) throws {
    try data.withUnsafeBytes { try write($0, at: offset) }
  }

  /// Records the object's total length and sizes the (sparse) data file to it. A short last chunk that is
  /// already written becomes present. Throws `StoreError.lengthConflict` if another length is recorded, and
  /// `StoreError.outOfBounds` if bytes were already written past it.
  public func setContentLength(_ length: Int64) throws {
    try state.withLock { state in
      try ensureWritable(state)
      if let known = state.manifest.contentLength {
        guard known == length else {
          throw StoreError.lengthConflict(objectID, recorded: known, declared: length)
        }
        return
      }
      guard length >= 0, length <= Manifest.maxLength(chunkSize: state.manifest.chunkSize) else {
        throw StoreError.outOfBounds(objectID, range: 0..<max(0, length), length: nil)
      }
      let chunkSize = Int64(state.manifest.chunkSize)
      let chunkCount = Int((length + chunkSize - 1) / chunkSize)
      // While the length was unknown every present chunk is a full chunk: none may reach past the length.
      if let beyond = state.manifest.presentChunks.ranges.last, Int64(beyond.upperBound) * chunkSize > length
      {
        throw StoreError.outOfBounds(
          objectID, range: Int64(beyond.lowerBound) * chunkSize..<Int64(beyond.upperBound) * chunkSize,
          length: length)
      }
      for (index, chunk) in state.partial
      where index >= chunkCount || Int64(index) * chunkSize + chunk.end > length {
        throw StoreError.outOfBounds(
          objectID, range: Int64(index) * chunkSize..<Int64(index) * chunkSize + chunk.end, length: length)
      }
      state.manifest.contentLength = length
      let size = try mapIO { try file.status().size }
      if size != length { try mapIO { try file.truncate(to: length) } }
      if chunkCount > 0 { try completeIfCovered(chunkCount - 1, &state) }
      // The length is part of the object's identity: it is committed even before any chunk completes.
      state.pending.contentLength = length
    }
  }

  /// Records the origin's validators where none are recorded yet (committed with the next batch). Different
  /// validators mean a different version: use `reset` for that.
  public func setValidators(etag: String?, lastModified: String?) throws {
    try state.withLock { state in
      try ensureWritable(state)
      if state.manifest.etag == nil, let etag {
        state.manifest.etag = etag
        state.pending.etag = etag
      }
      if state.manifest.lastModified == nil, let lastModified {
        state.manifest.lastModified = lastModified
        state.pending.lastModified = lastModified
      }
    }
  }

  /// Sets the content type recorded in the manifest (committed with the next batch).
  public func setContentType(_ contentType: String?) throws {
    if let contentType, contentType.utf8.count > Manifest.maxContentTypeBytes {
      throw StoreError.fieldTooLarge(
        field: "content type", size: contentType.utf8.count, limit: Manifest.maxContentTypeBytes)
    }
    try state.withLock { state in
      try ensureWritable(state)
      state.manifest.contentType = contentType
      state.pending.contentType = contentType ?? ""
    }
  }

  /// Sets the app's own metadata for this object (at most `Manifest.maxUserMetadataBytes`).
  public func setUserMetadata(_ metadata: Data) throws {
    guard metadata.count <= Manifest.maxUserMetadataBytes else {
      throw StoreError.fieldTooLarge(
        field: "user metadata", size: metadata.count, limit: Manifest.maxUserMetadataBytes)
    }
    try state.withLock { state in
      try ensureWritable(state)
      state.manifest.userMetadata = metadata
      state.pending.userMetadata = metadata
    }
  }

  /// Pins or unpins the object: a pinned object is never evicted.
  public func setPinned(_ pinned: Bool) throws {
    try state.withLock { state in
      try ensureWritable(state)
      state.manifest.isPinned = pinned
      state.pending.isPinned = pinned
    }
  }

  /// Starts a new version of the object (the origin's bytes changed): every chunk is forgotten, here and — at
  /// the next commit — on disk, and the new validators and length are recorded. Bytes of two versions are
  /// never mixed.
  public func reset(contentLength: Int64?, etag: String?, lastModified: String?) throws {
    try withNoCommitInFlight { state in
      try ensureWritable(state)
      var fresh = Manifest(
        objectID: objectID, chunkSize: state.manifest.chunkSize, contentLength: contentLength,
        contentType: state.manifest.contentType, etag: etag, lastModified: lastModified,
        isPinned: state.manifest.isPinned, userMetadata: state.manifest.userMetadata)
      fresh.createdAt = Date()
      fresh.versionTag = UInt32.random(in: 1...UInt32.max)
      state.manifest = fresh
      state.partial = [:]
      state.pending = ManifestChange()
      state.pending.reset = true
      try mapIO { try file.truncate(to: contentLength ?? 0) }
      try commitLocked(&state)
    }
  }

  /// Commits every completed chunk now.
  public func flush() throws {
    try withNoCommitInFlight { state in
      try ensureOpen(state)
      try reportBackgroundError(&state)
      if isWritable { try commitLocked(&state) }
    }
  }

  /// Commits, releases the in-use lock and closes the data file. Later calls throw `StoreError.closed`;
  /// a second `close()` does nothing.
  public func close() throws {
    try withNoCommitInFlight { state in
      if state.closed { return }
      try closeLocked(&state)
    }
  }

  private func closeLocked(_ state: inout State) throws {
    var leftOrphan = false
    defer {
      state.closed = true
      // Readers count themselves under the lock, which is held here: none starts now, and the ones running
      // finish their `pread` without the lock.
      while readsInFlight.load(ordering: .acquiring) > 0 { sched_yield() }
      file.close()
      // Nobody committed a manifest (this writer completed no chunk: its origin failed, its reader went away):
      // the data file it created would be an orphan, which `cache-fsck` reports as damage. It goes, through
      // `remove`'s protocol, unless another writer has it open or has committed since.
      if leftOrphan { _ = try? store.remove(objectID, keepIf: { $0 != nil }) }
    }
    if isWritable {
      try commitLocked(&state)
      try reportBackgroundError(&state)
      leftOrphan = try mapIO { try FileSystemCalls.fileType(store.paths(for: objectID).manifest) } == nil
    }
  }

  /// Runs `body` under the state lock once no background commit is in flight.
  private func withNoCommitInFlight<T>(_ body: (inout State) throws -> T) throws -> T {
    while true {
      backgroundCommit.wait()
      let result = try state.withLock { state -> T? in
        if state.commitInFlight { return nil }  // another writer handed over a batch meanwhile
        return try body(&state)
      }
      if let result { return result }
    }
  }

  // MARK: Reading

  /// The bytes of `range`, every chunk CRC-verified. For small ranges; use `bytes(in:)` for large ones.
  ///
  /// Throws `StoreError.notCached` (with the missing ranges) if any byte is not cached,
  /// `StoreError.outOfBounds` past a known length, `StoreError.corruptChunk` if a chunk fails its CRC (the chunk
  /// is dropped from the manifest so it can be fetched again).
  public func read(_ range: Range<Int64>) throws -> Data {
    let chunks = try state.withLock { state -> ClosedRange<Int>? in
      try ensureOpen(state)
      try checkCached(range, &state)
      store.noteAccess(objectID)
      let covering = state.manifest.chunks(covering: range)
      return covering.isEmpty ? nil : covering.first!...covering.last!
    }
    guard let chunks else { return Data() }
    let chunkSize = Int64(manifest.chunkSize)
    if chunks.count == 1, range.lowerBound == Int64(chunks.lowerBound) * chunkSize {
      // One chunk from its start (the common piece of a streamed read): no copy when it is the whole chunk.
      let data = try verifiedChunkData(chunks.lowerBound)
      return data.count == range.count ? data : data.prefix(Int(range.count))
    }
    var out = Data()
    out.reserveCapacity(Int(range.count))
    for index in chunks {
      let data = try verifiedChunkData(index)
      let chunkStart = Int64(index) * chunkSize
      let low = Int(max(range.lowerBound, chunkStart) - chunkStart)
      let high = Int(min(range.upperBound, chunkStart + Int64(data.count)) - chunkStart)
      out.append(data[data.startIndex + low..<data.startIndex + high])
    }
    return out
  }

  /// The bytes of `range` as chunk-sized pieces, read and verified one at a time as the sequence is iterated,
  /// so memory stays at about one chunk whatever the range. A missing or corrupt chunk ends the sequence with
  /// the same errors as `read(_:)`, after the good pieces before it.
  public func bytes(in range: Range<Int64>) -> ChunkReadSequence {
    ChunkReadSequence(manager: self, range: range)
  }

  /// One piece of a streamed read: the part of chunk-aligned `range`'s first chunk from `range.lowerBound`.
  func readPiece(startingAt offset: Int64, end: Int64) throws -> Data {
    let (index, chunkStart, pieceEnd) = try state.withLock { state in
      try ensureOpen(state)
      let chunkSize = Int64(state.manifest.chunkSize)
      let pieceEnd = min(end, (offset / chunkSize + 1) * chunkSize)
      try checkCached(offset..<pieceEnd, &state)
      store.noteAccess(objectID)
      let index = Int(offset / chunkSize)
      return (index, Int64(index) * chunkSize, pieceEnd)
    }
    let chunk = try verifiedChunkData(index)
    if offset == chunkStart && pieceEnd - chunkStart == Int64(chunk.count) { return chunk }
    return chunk.subdata(in: Int(offset - chunkStart)..<Int(pieceEnd - chunkStart))
  }

  private func checkCached(_ range: Range<Int64>, _ state: inout State) throws {
    guard range.lowerBound >= 0, state.manifest.contentLength.map({ range.upperBound <= $0 }) ?? true else {
      throw StoreError.outOfBounds(objectID, range: range, length: state.manifest.contentLength)
    }
    // Per chunk, not through the byte-range set: this runs for every piece of a streamed read.
    let covering = state.manifest.chunks(covering: range)
    if covering.allSatisfy({ state.manifest.isPresent($0) }) { return }
    try refreshLocked(&state)
    let missing = state.manifest.missingByteRanges(in: range)
    if !missing.isEmpty { throw StoreError.notCached(objectID, missing: missing) }
  }

  /// Chunk `index` read whole into a pooled buffer and CRC-checked there (no copy after the read). On a
  /// mismatch the chunk is dropped and `StoreError.corruptChunk` is thrown.
  ///
  /// The read and the check run without the state lock, so readers of one object (the proxy's players of one
  /// video) read in parallel, and neither waits for the other's disk: the lock is taken to see what to read
  /// (and to count the read, so `close` does not close the descriptor under it), and again only when the
  /// check fails, to drop the chunk if it is still the one that was read (a reset meanwhile changes the
  /// version, and the bytes then mean nothing about the chunk).
  ///
  /// The chunk is offered to `VerifiedChunkCache` when it is an object's first or last chunk, where players
  /// look for the index again and again. Others are not: keeping chunks read at random or streamed in order
  /// would only push those out, take their buffers from `ReadBufferPool` (so every read would fault in fresh
  /// pages), and delay finding damage on disk in the chunks a scrub or a reader would otherwise check.
  private func verifiedChunkData(_ index: Int) throws -> Data {
    let plan = try state.withLock {
      state -> (range: Range<Int64>, expected: UInt32, version: UInt32, keep: Bool) in
      try ensureOpen(state)
      guard let expected = state.manifest.crc(ofChunk: index) else {
        throw StoreError.notCached(objectID, missing: [state.manifest.byteRange(ofChunk: index)])
      }
      readsInFlight.add(1, ordering: .acquiring)
      return (
        state.manifest.byteRange(ofChunk: index), expected, state.manifest.versionTag, isEdge(index, state)
      )
    }
    let (range, expected) = (plan.range, plan.expected)
    // Only an object's first and last chunks are ever kept: no look-up (and no lock) for the others.
    let key = VerifiedChunkCache.Key(file: fileIdentity, version: plan.version, chunk: index, crc: expected)
    let data: Data
    var check: ChunkCheck?
    do {
      defer { readsInFlight.subtract(1, ordering: .releasing) }
      if plan.keep, let recent = VerifiedChunkCache.shared.data(for: key), recent.count == range.count {
        return recent
      }
      data = try ReadBufferPool.shared.data(count: Int(range.count)) { buffer in
        let read = try mapIO { try ChunkCheck.read(range, expected: expected, from: file, into: buffer) }
        check = read
        return read.bytesRead
      }
    }
    guard let check, check.passed else {
      let actual = check?.actual ?? 0
      try state.withLock { state in
        try ensureOpen(state)
        guard state.manifest.versionTag == plan.version, state.manifest.crc(ofChunk: index) == expected else {
          // Dropped or reset since the lock was let go: what was read says nothing about the chunk now.
          throw StoreError.notCached(objectID, missing: [range])
        }
        try dropChunk(index, expected: expected, &state)
      }
      throw StoreError.corruptChunk(objectID, chunk: index, expected: expected, actual: actual)
    }
    if plan.keep { VerifiedChunkCache.shared.insert(data, for: key) }
    return data
  }

  /// Whether chunk `index` is the object's first or (length known) last.
  private func isEdge(_ index: Int, _ state: State) -> Bool {
    index == 0 || state.manifest.chunkCount.map { index == $0 - 1 } ?? false
  }

  private func dropChunk(_ index: Int, expected: UInt32, _ state: inout State) throws {
    state.manifest.removeChunk(index)
    state.pending.added[index] = nil
    state.pending.dropped[index] = expected
    observer.chunksDropped?(objectID, 1)
    if isWritable {
      // With a batch in flight the drop goes with the next one (a commit now could list that batch's chunks
      // before they are flushed).
      if !state.commitInFlight { try commitLocked(&state) }
    } else {
      // A reader still records the drop, through a descriptor that may take the commit lock.
      if let writer = try? SystemFile(path: store.paths(for: objectID).data, writable: true) {
        let change = state.pending
        state.pending = ManifestChange()
        _ = try? store.commit(change, base: state.manifest, dataFile: writer)
        writer.close()
      }
    }
  }

  // MARK: Commit machinery

  private func completeIfCovered(_ index: Int, _ state: inout State) throws {
    guard let chunk = state.partial[index] else { return }
    let chunkSize = Int64(state.manifest.chunkSize)
    let needed: Int64
    if let length = state.manifest.contentLength {
      needed = min(chunkSize, length - Int64(index) * chunkSize)
    } else {
      needed = chunkSize
    }
    guard chunk.covers(needed) else { return }
    var crc: UInt32
    if let combined = chunk.crc, chunk.end == needed {
      crc = combined
    } else {
      // Overlapping rewrites: the CRC is taken from the bytes on disk.
      let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(needed), alignment: 16)
      defer { buffer.deallocate() }
      let count = try mapIO { try file.read(into: buffer, at: Int64(index) * chunkSize) }
      guard count == Int(needed) else { return }
      crc = CRC32.checksum(UnsafeRawBufferPointer(buffer))
    }
    state.partial[index] = nil
    state.manifest.setChunk(index, crc: crc)
    state.pending.added[index] = crc
    state.pending.dropped[index] = nil
    state.uncommittedBytes += needed
    observer.chunkCompleted?(needed)
  }

  /// Hands the pending batch to the background queue if it is due and none is in flight. Returns true when a
  /// batch is in flight and the backlog has reached `maxBacklog`: the caller should wait for it.
  private func commitIfDue(_ state: inout State) throws -> Bool {
    let now = Date().timeIntervalSince1970
    let due =
      state.uncommittedBytes >= policy.bytes
      || (!state.pending.isEmpty && now - state.lastCommit >= policy.interval)
    guard due else { return false }
    if state.commitInFlight { return state.uncommittedBytes >= policy.maxBacklog }
    let change = state.pending
    let base = state.manifest
    let foregroundCommits = state.foregroundCommits
    state.pending = ManifestChange()
    state.uncommittedBytes = 0
    state.lastCommit = now
    state.inFlight = change
    backgroundCommit.enter()
    // `self` is kept alive by the closure: a manager is never deinitialised with a batch in flight.
    Self.commitQueue.async {
      let outcome = self.commitInBackground(change, base: base)
      self.state.withLock { state in
        state.inFlight = nil
        self.adopt(outcome, of: change, foregroundCommits: foregroundCommits, &state)
      }
      self.backgroundCommit.leave()
    }
    return false
  }

  private enum BackgroundOutcome {
    case committed(CommitResult)
    /// The data file could not be flushed: its new chunks must not be listed (their bytes may be lost, and a
    /// second flush would not say so).
    case syncFailed(any Error)
    case commitFailed(any Error)
  }

  /// Flushes the data (durable mode) and commits `change`: runs on `commitQueue`, without the state lock.
  private func commitInBackground(_ change: ManifestChange, base: Manifest) -> BackgroundOutcome {
    if store.durability == .durable && !change.added.isEmpty {
      do {
        try mapIO { try file.syncData() }
        try syncNameOnce()
      } catch { return .syncFailed(error) }
    }
    do {
      return .committed(try store.commit(change, base: base, dataFile: file))
    } catch {
      return .commitFailed(error)
    }
  }

  private func adopt(
    _ outcome: BackgroundOutcome, of change: ManifestChange, foregroundCommits: Int, _ state: inout State
  ) {
    switch outcome {
    case .committed(let result):
      if result.superseded {
        // Another writer moved the object to a new version: what this writer did since is of the old one.
        state.partial = [:]
        state.pending = ManifestChange()
        state.uncommittedBytes = 0
        state.manifest = result.manifest
      } else if state.foregroundCommits == foregroundCommits {
        state.manifest = state.pending.merge(into: result.manifest, base: state.manifest).manifest
      }
    case .syncFailed(let error):
      state.backgroundError = error
      for (index, crc) in change.added where state.manifest.crc(ofChunk: index) == crc {
        state.manifest.removeChunk(index)
      }
      // Chunks completed since the batch was handed over may have been written before that sync started.
      forgetUnsyncedChunks(&state)
      var metadata = change
      metadata.added = [:]
      state.pending.absorb(earlier: metadata)
    case .commitFailed(let error):
      state.backgroundError = error
      state.pending.absorb(earlier: change)
      state.uncommittedBytes += Int64(change.added.count) * Int64(state.manifest.chunkSize)
    }
  }

  /// After a failed fdatasync: the pages it was to flush may be lost for good (Linux marks them clean after a
  /// writeback error, and a later sync that succeeds does not say so), so the pending chunks and the parts of
  /// incomplete ones are forgotten and must be written again; the rest of the pending change is kept.
  private func forgetUnsyncedChunks(_ state: inout State) {
    for (index, crc) in state.pending.added where state.manifest.crc(ofChunk: index) == crc {
      state.manifest.removeChunk(index)
    }
    state.pending.added = [:]
    state.partial = [:]
    state.uncommittedBytes = 0
  }

  /// Flushes the shard directory and its parents, once per manager, before a commit lists chunks (see
  /// `nameSynced`).
  private func syncNameOnce() throws {
    if nameSynced.load(ordering: .acquiring) { return }
    try store.syncShardChain(for: objectID)
    nameSynced.store(true, ordering: .releasing)
  }

  private func reportBackgroundError(_ state: inout State) throws {
    if let error = state.backgroundError {
      state.backgroundError = nil
      throw error
    }
  }

  private func commitLocked(_ state: inout State) throws {
    if state.pending.isEmpty { return }
    if store.durability == .durable && !state.pending.added.isEmpty {
      do {
        try mapIO { try file.syncData() }
        try syncNameOnce()
      } catch {
        forgetUnsyncedChunks(&state)
        throw error
      }
    }
    let result = try store.commit(state.pending, base: state.manifest, dataFile: file)
    if result.superseded { state.partial = [:] }
    state.manifest = result.manifest
    state.pending = ManifestChange()
    state.uncommittedBytes = 0
    state.lastCommit = Date().timeIntervalSince1970
    state.foregroundCommits += 1
  }

  private func refreshLocked(_ state: inout State) throws {
    let onDisk: Manifest?
    do { onDisk = try store.readManifest(objectID) } catch StoreError.corruptManifest { onDisk = nil }
    guard let onDisk else { return }
    // Chunks of a batch in flight are not on disk yet but are still this writer's.
    var mine = state.pending
    if let inFlight = state.inFlight { mine.absorb(earlier: inFlight) }
    state.manifest = mine.merge(into: onDisk, base: state.manifest).manifest
  }

  private func ensureOpen(_ state: State) throws {
    if state.closed { throw StoreError.closed(objectID) }
  }

  private func ensureWritable(_ state: State) throws {
    try ensureOpen(state)
    if !isWritable {
      throw StoreError.io(
        operation: "write", path: store.paths(for: objectID).data, errno: .badFileDescriptor)
    }
  }
}

/// Which bytes of one not-yet-complete chunk have been written, with the CRC of each contiguous run when the
/// runs were written without overlap.
struct PartialChunk: Sendable {
  /// Disjoint runs (offsets inside the chunk), ascending; adjacent runs are merged with `crc32_combine`.
  private(set) var runs: [(range: Range<Int64>, crc: UInt32?)] = []

  /// End of the last run.
  var end: Int64 { runs.last?.range.upperBound ?? 0 }

  /// The CRC of the chunk's first run when it is the only one and its CRC is known.
  var crc: UInt32? { runs.count == 1 && runs[0].range.lowerBound == 0 ? runs[0].crc : nil }

  /// Whether bytes `0..<length` are all written.
  func covers(_ length: Int64) -> Bool {
    runs.count == 1 && runs[0].range.lowerBound == 0 && runs[0].range.upperBound >= length
  }

  mutating func add(_ range: Range<Int64>, crc: UInt32) {
    var insertAt = runs.firstIndex { $0.range.lowerBound >= range.lowerBound } ?? runs.count
    runs.insert((range, crc), at: insertAt)
    // Merge with the left neighbour, then keep merging rightwards.
    if insertAt > 0 && runs[insertAt - 1].range.upperBound >= range.lowerBound { insertAt -= 1 }
    while insertAt + 1 < runs.count && runs[insertAt].range.upperBound >= runs[insertAt + 1].range.lowerBound
    {
      let left = runs[insertAt]
      let right = runs[insertAt + 1]
      let merged: UInt32?
      if left.range.upperBound == right.range.lowerBound, let a = left.crc, let b = right.crc {
        merged = CRC32.combine(a, b, lengthOfB: Int64(right.range.count))
      } else {
        merged = nil  // overlap: the bytes on disk decide
      }
      let upper = max(left.range.upperBound, right.range.upperBound)
      runs[insertAt] = (left.range.lowerBound..<upper, merged)
      runs.remove(at: insertAt + 1)
    }
  }
}

/// The pieces of a streamed, verified range read (`FileHandleAssetDataManager.bytes(in:)`).
public struct ChunkReadSequence: AsyncSequence, Sendable {
  public typealias Element = Data
  let manager: FileHandleAssetDataManager
  let range: Range<Int64>

  public func makeAsyncIterator() -> Iterator {
    Iterator(manager: manager, cursor: range.lowerBound, end: range.upperBound)
  }

  /// Reads the next chunk when asked, never ahead.
  public struct Iterator: AsyncIteratorProtocol {
    let manager: FileHandleAssetDataManager
    var cursor: Int64
    let end: Int64

    public mutating func next() async throws -> Data? {
      guard cursor < end else { return nil }
      let (manager, start, end) = (manager, cursor, end)
      let piece = try await IOExecutor.shared.run { try manager.readPiece(startingAt: start, end: end) }
      cursor += Int64(piece.count)
      return piece
    }
  }
}
