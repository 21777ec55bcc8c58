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

  /// The cache removed objects or cut their tails: their unplayed preloaded bytes there count as evicted.
  public func note(_ event: CacheEvent) {
    switch event {
    case .removed(let objects):
      for object in objects { evict(object.id, from: 0) }
    case .trimmed(let objects):
      for object in objects { evict(object.id, from: object.keptHead) }
    case .exceededMaxSize, .chunksDropped:
      break
    }
  }

  /// The unplayed bytes of `id` from `start` on are gone from the cache; a removed object is forgotten.
  private func evict(_ id: ObjectID, from start: Int64) {
    state.withLock { state in
      guard var entry = state.entries[id] else { return }
      let gone = entry.unplayed.intersection(start..<Int64.max).count
      entry.unplayed.remove(start..<Int64.max)
      entry.recorded.remove(start..<Int64.max)
      state.totals.evictedUnplayed += gone
      state.totals.unplayed -= gone
      store(start == 0 ? nil : entry, for: id, in: &state)
    }
  }
}
