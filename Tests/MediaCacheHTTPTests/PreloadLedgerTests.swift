import MediaCache
import Testing

@testable import MediaCacheHTTP

/// `PreloadLedger`: each preloaded byte is settled once, as served to a player or as evicted unplayed.
@Suite struct PreloadLedgerTests {
  let a = CacheKey("a").objectID
  let b = CacheKey("b").objectID

  func removed(_ id: ObjectID) -> CacheEvent { .removed([RemovedObject(id: id, bytes: 1, reason: .size)]) }

  @Test func servedBytesAreCountedOnceAndOnlyIfPreloaded() {
    let ledger = PreloadLedger()
    #expect(!ledger.isTracking)
    ledger.noteServed(a, 0..<100)  // nothing preloaded yet: nothing counted
    ledger.recordPreloaded(a, [0..<1000, 5000..<6000])
    // A later sample of the same fetch names the same bytes again: not counted twice.
    ledger.recordPreloaded(a, [0..<1000, 5000..<6500])
    #expect(ledger.isTracking)
    #expect(ledger.totals == .init(preloaded: 2500, unplayed: 2500))
    ledger.noteServed(a, 500..<5200)  // 500 of the head and 200 of the second range
    ledger.noteServed(a, 0..<1000)  // 500 more; 500..<1000 was served already
    ledger.noteServed(b, 0..<1000)  // another object
    #expect(ledger.totals == .init(preloaded: 2500, servedAfterPreload: 1200, unplayed: 1300))
    // Served bytes preloaded again (the same fetch sampled later) stay served.
    ledger.recordPreloaded(a, [0..<1000])
    #expect(ledger.totals.preloaded == 2500)
    // Bytes a player was served before a preload's sample named them were not preloaded.
    ledger.noteServed(a, 7000..<7500)
    ledger.recordPreloaded(a, [7000..<8000])
    #expect(ledger.totals.preloaded == 3000 && ledger.totals.unplayed == 1800)
    // Once every preloaded byte is served, serving skips the ledger (nothing waits).
    ledger.noteServed(a, 0..<10_000)
    #expect(!ledger.isTracking && ledger.totals.unplayed == 0)
  }

  /// A check against the disk (another process's eviction) settles what is no longer cached, but not when a
  /// preload recorded bytes since the check listed the object (its read of the disk may predate them). A cut
  /// that keeps ranges past the head (an MP4's moov at its end) keeps their unplayed bytes.
  @Test func checksAgainstTheDiskSettleWhatIsGone() throws {
    let ledger = PreloadLedger()
    ledger.recordPreloaded(a, [0..<1000])
    let listed = ledger.objectsWithUnplayedBytes()
    #expect(listed.map(\.id) == [a])
    ledger.recordPreloaded(a, [1000..<2000])
    ledger.settle(a, stillCached: ByteRangeSet([0..<1000]), recordedBy: try #require(listed.first?.stamp))
    #expect(ledger.totals == .init(preloaded: 2000, unplayed: 2000))
    let again = try #require(ledger.objectsWithUnplayedBytes().first?.stamp)
    ledger.settle(a, stillCached: ByteRangeSet([0..<1500]), recordedBy: again)
    #expect(ledger.totals == .init(preloaded: 2000, evictedUnplayed: 500, unplayed: 1500))
    ledger.settle(a, stillCached: nil)
    #expect(ledger.totals == .init(preloaded: 2000, evictedUnplayed: 2000, unplayed: 0))
    #expect(ledger.objectsWithUnplayedBytes().isEmpty && !ledger.isTracking)

    ledger.recordPreloaded(b, [0..<100, 900..<1000])
    ledger.note(.trimmed([TrimmedObject(id: b, keptHead: 50, keptRanges: [0..<50, 950..<1000], bytes: 1)]))
    #expect(ledger.totals.evictedUnplayed == 2000 + 100 && ledger.totals.unplayed == 100)
  }

  @Test func evictionsAndCutTailsSettleTheUnplayedBytes() {
    let ledger = PreloadLedger()
    ledger.recordPreloaded(a, [0..<4096, 8192..<16384])
    ledger.recordPreloaded(b, [0..<2048])
    ledger.noteServed(a, 0..<1024)
    // a is cut down to its first 8 KiB: the 8 KiB past it were never played.
    ledger.note(.trimmed([TrimmedObject(id: a, keptHead: 8192, bytes: 8192)]))
    #expect(
      ledger.totals
        == .init(preloaded: 14336, servedAfterPreload: 1024, evictedUnplayed: 8192, unplayed: 5120))
    ledger.note(removed(b))
    ledger.note(.chunksDropped(a, count: 1))
    #expect(
      ledger.totals
        == .init(preloaded: 14336, servedAfterPreload: 1024, evictedUnplayed: 10240, unplayed: 3072))
    // Fetched again after the cut: preloaded again.
    ledger.recordPreloaded(a, [8192..<12288])
    #expect(ledger.totals.preloaded == 18432 && ledger.totals.unplayed == 7168)
    ledger.note(removed(a))
    #expect(ledger.totals.unplayed == 0 && ledger.totals.evictedUnplayed == 17408)
    #expect(!ledger.isTracking)
  }

  @Test func theOldestObjectIsForgottenPastTheBound() {
    let ledger = PreloadLedger(maxObjects: 2)
    let ids = (0..<3).map { CacheKey("o\($0)").objectID }
    for id in ids { ledger.recordPreloaded(id, [0..<100]) }
    #expect(ledger.totals == .init(preloaded: 300, unplayed: 200, forgottenBytes: 100))
    ledger.noteServed(ids[0], 0..<100)  // forgotten: no longer counted
    ledger.noteServed(ids[2], 0..<100)
    #expect(ledger.totals.servedAfterPreload == 100)
    // Conservation: every preloaded byte is served, evicted, forgotten or still waiting.
    let totals = ledger.totals
    #expect(
      totals.preloaded
        == totals.servedAfterPreload + totals.evictedUnplayed + totals.unplayed + totals.forgottenBytes)
  }
}
