import Synchronization

/// What the readers of one open object need, under a lock that is never held across a system call: the
/// manifest as this handle knows it (what was committed when it last read or wrote the manifest, plus the
/// chunks its writer completed since), the writer's changes not yet on disk, and whether the handle is closed.
///
/// Readers take this lock only to plan a read (is the chunk present, with which CRC); the `pread` and the CRC
/// check run without it. The writer (`ObjectWriter`) keeps its own lock across `pwrite`, `fsync` and manifest
/// commits and comes here only to publish what changed, so a reader never waits for the disk on a writer's
/// behalf. Lock order: the writer's lock, then this one.
final class ObjectView: Sendable {
  struct State {
    var manifest: Manifest
    /// Changes of this handle's writer not yet handed to a commit.
    var pending = ManifestChange()
    /// The batch being committed now, if any (its chunks are not on disk yet but are still this writer's).
    var inFlight: ManifestChange?
    /// Counts commits adopted, so a `refresh` that read the disk before one does not undo it.
    var commits = 0
    var closed = false

    var commitInFlight: Bool { inFlight != nil }
  }

  let objectID: ObjectID
  private let state: Mutex<State>
  /// Chunk reads running without the lock: `close` waits for them before it closes the descriptor they read
  /// through. Counted under the lock, after the check that the handle is open.
  let readsInFlight = Atomic<Int>(0)
  /// Whether the object has a manifest on disk: found by the open, or committed or read since. Until it has,
  /// a read has no recency stamp to set (`VerifiedChunkReader.noteAccess`).
  let manifestOnDisk: Atomic<Bool>

  /// The view of object `objectID` as `manifest` says; `onDisk`: the manifest was read from the disk (else
  /// the object has none yet, and its first commit makes one).
  init(objectID: ObjectID, manifest: Manifest, onDisk: Bool) {
    self.objectID = objectID
    state = Mutex(State(manifest: manifest))
    manifestOnDisk = Atomic(onDisk)
  }

  /// Runs `body` under the lock. `body` must not make a system call.
  func withLock<T, E: Error>(_ body: (inout sending State) throws(E) -> sending T) throws(E) -> sending T {
    try state.withLock(body)
  }

  /// The manifest as this handle knows it now.
  var manifest: Manifest { state.withLock { $0.manifest } }

  /// Throws `StoreError.closed` once the handle is closed.
  func ensureOpen(_ state: State) throws {
    if state.closed { throw StoreError.closed(objectID) }
  }

  /// Reads the committed manifest (without the lock) and merges it into the view: chunks other writers
  /// committed become readable here; this writer's own changes, committed or not, are kept.
  func refresh(from store: ShardedStore) throws {
    for _ in 0..<8 {
      let before = state.withLock { $0.commits }
      let onDisk: Manifest?
      do { onDisk = try store.readManifest(objectID) } catch let error as StoreError
        where error.code == .corruptManifest
      { onDisk = nil }
      guard let onDisk else { return }
      manifestOnDisk.store(true, ordering: .relaxed)
      let merged = state.withLock { state -> Bool in
        // A commit adopted since the read: the disk moved on, and what was read may lack its chunks.
        guard state.commits == before else { return false }
        var mine = state.pending
        if let inFlight = state.inFlight { mine.absorb(earlier: inFlight) }
        state.manifest = mine.merge(into: onDisk, base: state.manifest).manifest
        return true
      }
      if merged { return }
    }
  }
}
