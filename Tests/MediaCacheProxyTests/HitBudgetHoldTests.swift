import MediaCache
import MediaCacheHTTP
import Testing

@testable import MediaCacheProxy

/// A hit's share of the bytes hits may have in flight (`ProxyServer.Configuration.hitBytesInFlight`): the range
/// and a block beyond each end, taken first come, first served, given back once.
struct HitBudgetHoldTests {
  /// Waits (generously) until `budget` has `count` readers waiting.
  func waitUntil(_ budget: ReadBudget, waiting count: Int) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while budget.waiting != count, ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(5))
    }
    return budget.waiting == count
  }

  @Test func aShareIsWaitedForAndGivenBackOnce() async throws {
    let budget = ReadBudget(limit: 400 << 10)
    // 100 KiB and a 64 KiB block beyond each end: 228 KiB of 400, 172 left.
    let first = try #require(await HitBudgetHold.acquire(budget, for: 0..<(100 << 10)))
    // 150 KiB and its blocks, 278 KiB: more than is left (it would fit had the first taken only its range).
    let second = Task { await HitBudgetHold.acquire(budget, for: 0..<(150 << 10)) }
    #expect(try await waitUntil(budget, waiting: 1), "a share larger than what is free waits")
    first.release()
    let secondHold = try #require(await second.value)
    first.release()  // a second release gives nothing back: 122 KiB stay free
    let third = Task { await budget.acquire(150 << 10) }
    #expect(try await waitUntil(budget, waiting: 1), "the first share was given back twice")
    secondHold.release()
    #expect(await third.value == 150 << 10)
    #expect(await HitBudgetHold.acquire(nil, for: 0..<1) == nil)
  }
}
