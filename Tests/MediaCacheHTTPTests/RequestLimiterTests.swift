import Synchronization
import Testing

@testable import MediaCacheHTTP

/// `RequestLimiter`: at most `limit` holders; a free slot is taken at once, a release hands the slot to the
/// longest waiter, and a waiter cancelled before its turn leaves without one.
@Suite struct RequestLimiterTests {
  @Test func freeSlotsAreTakenAtOnceAndReleasesPassThemToWaitersInOrder() async throws {
    let limiter = RequestLimiter(limit: 2)
    try await limiter.acquire()
    try await limiter.acquire()
    let order = Passes()
    let first = Task {
      try await limiter.acquire()
      order.values.withLock { $0.append(1) }
    }
    // The second waiter starts only once the first waits, so their order is known.
    while limiter.waiting < 1 { await Task.yield() }
    let second = Task {
      try await limiter.acquire()
      order.values.withLock { $0.append(2) }
    }
    while limiter.waiting < 2 { await Task.yield() }
    #expect(order.values.withLock { $0 }.isEmpty, "both slots are held: nobody may pass")
    limiter.release()
    try await first.value
    #expect(order.values.withLock { $0 } == [1])
    limiter.release()
    try await second.value
    #expect(order.values.withLock { $0 } == [1, 2])
    // Both waiters hold a slot now: two releases free both, and two takes succeed without waiting.
    limiter.release()
    limiter.release()
    try await limiter.acquire()
    try await limiter.acquire()
  }

  @Test func aWaiterCancelledBeforeItsTurnThrowsAndTakesNoSlot() async throws {
    let limiter = RequestLimiter(limit: 1)
    try await limiter.acquire()
    let waiter = Task { try await limiter.acquire() }
    while limiter.waiting < 1 { await Task.yield() }
    waiter.cancel()
    await #expect(throws: CancellationError.self) { try await waiter.value }
    #expect(limiter.waiting == 0)
    // The slot goes back free (the cancelled waiter is not handed it): one take after the release succeeds,
    // and a second one waits.
    limiter.release()
    try await limiter.acquire()
    let next = Task { try await limiter.acquire() }
    while limiter.waiting < 1 { await Task.yield() }
    #expect(limiter.waiting == 1)
    limiter.release()
    try await next.value
  }

  /// Many tasks taking and releasing a limiter of 3: never more than 3 inside at once, and every one gets in.
  @Test func underContentionAtMostTheLimitHoldASlot() async throws {
    let limiter = RequestLimiter(limit: 3)
    let counts = Occupancy()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for _ in 0..<200 {
        group.addTask {
          try await limiter.acquire()
          let now = counts.inside.add(1, ordering: .relaxed).newValue
          counts.most.max(now, ordering: .relaxed)
          await Task.yield()
          counts.inside.subtract(1, ordering: .relaxed)
          limiter.release()
        }
      }
      try await group.waitForAll()
    }
    #expect(counts.most.load(ordering: .relaxed) <= 3)
    #expect(counts.most.load(ordering: .relaxed) >= 1)
    #expect(counts.inside.load(ordering: .relaxed) == 0)
  }
}

/// Which waiters got through, in order.
private final class Passes: Sendable {
  let values = Mutex<[Int]>([])
}

/// Holders inside at once, and the most seen.
private final class Occupancy: Sendable {
  let inside = Atomic<Int>(0)
  let most = Atomic<Int>(0)
}
