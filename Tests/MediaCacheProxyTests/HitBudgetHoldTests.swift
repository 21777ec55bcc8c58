import MediaCache
import MediaCacheHTTP
import Testing

@testable import MediaCacheProxy

/// A hit's share of the bytes hits may have in flight (`ProxyServer.Configuration.hitBytesInFlight`): taken
/// first come, first served, trimmed to what was read, given back once.
struct HitBudgetHoldTests {
  /// Waits (generously) until `budget` has `count` readers waiting.
  func waitUntil(_ budget: ReadBudget, waiting count: Int) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while budget.waiting != count, ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(5))
    }
    return budget.waiting == count
  }

  @Test func aShareIsTrimmedWaitedForAndGivenBackOnce() async throws {
    let budget = ReadBudget(limit: 1000)
    // A range of 10 bytes asks for it and the blocks around it: more than the budget, so all of it.
    let first = try #require(await HitBudgetHold.acquire(budget, for: .bounded(0..<10), maxBytes: 2 << 20))
    first.keep(400)  // 600 back
    let second = Task { await HitBudgetHold.acquire(budget, for: .all, maxBytes: 2 << 20) }
    #expect(try await waitUntil(budget, waiting: 1), "a share larger than what is free waits")
    first.release()
    let secondHold = try #require(await second.value)
    first.release()  // a second release gives nothing back
    let third = Task { await budget.acquire(1) }
    #expect(try await waitUntil(budget, waiting: 1), "the first share was given back twice")
    secondHold.release()
    #expect(await third.value == 1)
    #expect(await HitBudgetHold.acquire(nil, for: .all, maxBytes: 1) == nil)
  }
}
