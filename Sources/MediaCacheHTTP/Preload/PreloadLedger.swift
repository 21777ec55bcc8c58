import MediaCache
import Synchronization

/// What became of the bytes a preloader fetched: served to a player later, evicted before anyone played them,
/// or still waiting. A feed app (or the proxy's `/metrics`) reads `totals` to see whether preloading pays.
///
/// The preloader records the byte ranges its fetches brought into the cache; whoever serves players reports
/// what it served (`noteServed`); the cache's events (`note(_:)`) report removals and cut tails. A byte counts
/// once: as served the first time a player gets it, as evicted if it goes first. Memory is bounded: at most
/// `maxObjects` objects are tracked, the least recently preloaded one is forgotten first (its bytes are then
/// neither served nor evicted, and `forgottenBytes` counts them).
public final class PreloadLedger: Sendable {
  /// The counters so far.
  public struct Totals: Sendable, Equatable {
    /// Bytes preloaded (fetched from an origin by a preload, each byte once).
    public var preloaded: Int64 = 0
    /// Of those, bytes later served to a player.
    public var servedAfterPreload: Int64 = 0
    /// Of those, bytes removed from the cache (an eviction, a cut tail, a removal) before a player got them.
    public var evictedUnplayed: Int64 = 0
    /// Bytes preloaded and still neither served nor evicted.
    public var unplayed: Int64 = 0
    /// Bytes dropped from the ledger unresolved because more than `maxObjects` objects were tracked.
    public var forgottenBytes: Int64 = 0
  }

  private struct Entry {
    /// Every byte ever recorded as preloaded (so a later sample of the same fetch is not counted again).
    var recorded = ByteRangeSet()
    /// The recorded bytes no player has been served and that are still cached.
    var unplayed = ByteRangeSet()
    /// When it was last recorded into (for forgetting the oldest).
    var stamp: UInt64
  }

  private struct State {
    var entries: [ObjectID: Entry] = [:]
    var totals = Totals()
    var clock: UInt64 = 0
    /// Entries whose `unplayed` is not empty.
    var withUnplayed = 0
  }

  private let state = Mutex(State())
  /// Objects with unplayed bytes (`State.withUnplayed`): serving checks it without the lock and skips the
  /// ledger when nothing waits.
  private let tracked = Atomic<Int>(0)

  /// Stores `entry` (nil: forgets it) and keeps the count of objects with unplayed bytes.
  private func store(_ entry: Entry?, for id: ObjectID, in state: inout State) {
    let before = state.entries[id].map { !$0.unplayed.isEmpty } ?? false
    let after = entry.map { !$0.unplayed.isEmpty } ?? false
    state.entries[id] = entry
    if before != after {
      state.withUnplayed += after ? 1 : -1
      tracked.store(state.withUnplayed, ordering: .relaxed)
    }
  }
  /// The most objects tracked at once.
  public let maxObjects: Int

  /// A ledger tracking at most `maxObjects` objects (default 10 000).
  public init(maxObjects: Int = 10_000) {
    self.maxObjects = max(1, maxObjects)
  }

  /// The counters so far.
  public var totals: Totals { state.withLock { $0.totals } }

  /// Whether any object has unplayed preloaded bytes (cheap: no lock).
  public var isTracking: Bool { tracked.load(ordering: .relaxed) > 0 }

  /// A preload brought `ranges` of object `id` into the cache. Bytes recorded before are not counted again.
  public func recordPreloaded(_ id: ObjectID, _ ranges: some Sequence<Range<Int64>>) {
    state.withLock { state in
      state.clock += 1
      var entry = state.entries[id] ?? Entry(stamp: state.clock)
      let fresh = ByteRangeSet(ranges.filter { !$0.isEmpty }).subtracting(entry.recorded)
      entry.stamp = state.clock
      guard !fresh.isEmpty else {
        if state.entries[id] != nil { state.entries[id] = entry }
        return
      }
      entry.recorded = entry.recorded.union(fresh)
      entry.unplayed = entry.unplayed.union(fresh)
      state.totals.preloaded += fresh.count
      state.totals.unplayed += fresh.count
      store(entry, for: id, in: &state)
      // Past the bound: an O(n) search, once per new object beyond 10 000 (a few microseconds).
      if state.entries.count > maxObjects,
        let oldest = state.entries.min(by: { $0.value.stamp < $1.value.stamp })
      {
        store(nil, for: oldest.key, in: &state)
        state.totals.unplayed -= oldest.value.unplayed.count
        state.totals.forgottenBytes += oldest.value.unplayed.count
      }
    }
  }

  /// A player was served `range` of object `id`.
  public func noteServed(_ id: ObjectID, _ range: Range<Int64>) {
    guard isTracking, !range.isEmpty else { return }
    state.withLock { state in
      guard var entry = state.entries[id] else { return }
      let served = entry.unplayed.intersection(range).count
      entry.unplayed.remove(range)
      // Served before a preload's sample names them (a player's own flight cached them): never preloaded.
      entry.recorded.insert(range)
      state.totals.servedAfterPreload += served
      state.totals.unplayed -= served
      store(entry, for: id, in: &state)
    }
  }

  /// The cache removed objects or cut their tails: their unplayed preloaded bytes no longer kept count as
  /// evicted.
  public func note(_ event: CacheEvent) {
    switch event {
    case .removed(let objects):
      for object in objects { settle(object.id, stillCached: nil) }
    case .trimmed(let objects):
      for object in objects { settle(object.id, stillCached: ByteRangeSet(object.keptRanges)) }
    case .exceededMaxSize, .chunksDropped:
      break
    }
  }

  /// Objects with unplayed preloaded bytes (at most `limit`), each with the ledger's stamp of its last record:
  /// what `settle(_:stillCached:recordedBy:)` is for when another process (`cache-compactor`, `mediacache rm`,
  /// `cache-fsck --repair`) may have removed or cut them without this process's events.
  public func objectsWithUnplayedBytes(limit: Int = 1000) -> [(id: ObjectID, stamp: UInt64)] {
    state.withLock { state in
      Array(
        state.entries.lazy.filter { !$0.value.unplayed.isEmpty }.map { (id: $0.key, stamp: $0.value.stamp) }
          .prefix(max(0, limit)))
    }
  }

  /// Object `id` now holds `stillCached` (nil: it is gone): its unplayed preloaded bytes outside that count as
  /// evicted; a gone object is forgotten. With `stamp` (from `objectsWithUnplayedBytes`), nothing happens if a
  /// preload recorded bytes of the object since: `stillCached` may have been read before they were committed.
  public func settle(_ id: ObjectID, stillCached: ByteRangeSet?, recordedBy stamp: UInt64? = nil) {
    state.withLock { state in
      guard var entry = state.entries[id], stamp.map({ $0 == entry.stamp }) ?? true else { return }
      let kept = stillCached ?? ByteRangeSet()
      let gone = entry.unplayed.subtracting(kept)
      guard !gone.isEmpty || stillCached == nil else { return }
      entry.unplayed = entry.unplayed.subtracting(gone)
      // What is no longer cached is forgotten as recorded (recorded ∩ kept): fetched again, it is preloaded
      // again.
      entry.recorded = entry.recorded.subtracting(entry.recorded.subtracting(kept))
      state.totals.evictedUnplayed += gone.count
      state.totals.unplayed -= gone.count
      store(stillCached == nil ? nil : entry, for: id, in: &state)
    }
  }
}
