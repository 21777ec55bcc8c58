import Testing

@testable import mediacache

/// When the proxy gives its heap's free memory back (`HeapTrimSchedule`, run by `ProxyAllocator`).
@Suite struct HeapTrimScheduleTests {
  static let mib = 1 << 20

  @Test func aBurstIsTrimmedAtOnceAndWhatItLeftWithinTheInterval() {
    var schedule = HeapTrimSchedule()
    let start = ContinuousClock.now
    func at(_ seconds: Int) -> ContinuousClock.Instant { start + .seconds(seconds) }
    func look(_ mib: Int, at seconds: Int) -> Bool {
      schedule.shouldTrim(resident: mib * Self.mib, now: at(seconds))
    }
    // The first look notes the level.
    #expect(!look(48, at: 0))
    // Growth below `growth` waits; growth of `growth` above the lowest level since is trimmed at once.
    #expect(!look(60, at: 1))
    #expect(!look(46, at: 2))
    #expect(look(62, at: 3))
    // The trim left the heap large (its buffers were in use): no trim again until it grows again...
    schedule.trimmed(resident: 150 * Self.mib, at: at(3))
    #expect(!look(160, at: 4))
    #expect(look(166, at: 5))
    schedule.trimmed(resident: 166 * Self.mib, at: at(5))
    // ... or until the interval passed: the burst's buffers freed since are given back then.
    #expect(!look(120, at: 14))
    #expect(look(120, at: 15))
    schedule.trimmed(resident: 50 * Self.mib, at: at(15))
    // A quiet heap is looked at again every interval (a trim that finds nothing costs a walk of free lists).
    #expect(!look(50, at: 16))
    #expect(look(50, at: 25))
  }
}
