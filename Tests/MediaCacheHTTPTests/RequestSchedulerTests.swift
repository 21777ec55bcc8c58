import Testing

@testable import MediaCacheHTTP

/// `RequestScheduler` without an origin: `tryAcquire` takes a free slot without waiting and never queues, a
/// promotion before the request asks for its slot is kept for it, and a waiter cancelled before its turn leaves
/// the queue without a slot (and stops holding back background work for its host).
@Suite struct RequestSchedulerTests {
  @Test func tryAcquireTakesFreeSlotsAndNeverQueues() {
    let scheduler = RequestScheduler(maxForeground: 1, maxBackgroundPerHost: 1)
    #expect(scheduler.tryAcquire(id: 1, host: "h", priority: .foreground) == .foreground)
    #expect(scheduler.tryAcquire(id: 2, host: "h", priority: .foreground) == nil, "the cap of 1 is reached")
    #expect(scheduler.tryAcquire(id: 3, host: "h", priority: .background) == .background)
    #expect(
      scheduler.tryAcquire(id: 4, host: "h", priority: .background) == nil, "one background slot per host")
    #expect(scheduler.tryAcquire(id: 5, host: "other", priority: .background) == .background)
    #expect(
      scheduler.waiting.foreground == 0 && scheduler.waiting.background == 0, "a refused try waits nowhere")
    #expect(scheduler.running.foreground == 1)
    #expect(scheduler.running.background == ["h": 1, "other": 1])
    scheduler.release(id: 1, host: "h", slot: .foreground)
    scheduler.release(id: 3, host: "h", slot: .background)
    #expect(scheduler.tryAcquire(id: 2, host: "h", priority: .foreground) == .foreground)
    #expect(scheduler.tryAcquire(id: 4, host: "h", priority: .background) == .background)
  }

  @Test func aPromotionBeforeTheRequestAsksGivesItAForegroundSlot() async throws {
    let scheduler = RequestScheduler(maxForeground: nil, maxBackgroundPerHost: 1)
    #expect(scheduler.tryAcquire(id: 1, host: "h", priority: .background) == .background)
    // Request 2 is background work whose flight a player joined before its task asked for a slot.
    scheduler.promote(2)
    #expect(scheduler.tryAcquire(id: 2, host: "h", priority: .background) == .foreground)
    // The same through `acquire`.
    scheduler.promote(3)
    #expect(try await scheduler.acquire(id: 3, host: "h", priority: .background) == .foreground)
    #expect(scheduler.running.foreground == 2)
    #expect(scheduler.tryAcquire(id: 4, host: "h", priority: .background) == nil, "request 1 holds the slot")
  }

  @Test func aCancelledWaiterLeavesWithoutASlotAndReleasesBackgroundWork() async throws {
    let scheduler = RequestScheduler(maxForeground: 1, maxBackgroundPerHost: 1)
    #expect(scheduler.tryAcquire(id: 1, host: "h", priority: .foreground) == .foreground)
    let player = Task { try await scheduler.acquire(id: 2, host: "h", priority: .foreground) }
    while scheduler.waiting.foreground == 0 { await Task.yield() }
    let background = Task { try await scheduler.acquire(id: 3, host: "h", priority: .background) }
    while scheduler.waiting.background == 0 { await Task.yield() }
    #expect(scheduler.running.background["h"] == nil, "background waits while a player of its host waits")
    player.cancel()
    await #expect(throws: CancellationError.self) { try await player.value }
    // The player's withdrawal lets the background request start; the foreground slot is still request 1's.
    #expect(try await background.value == .background)
    #expect(scheduler.running.foreground == 1)
    #expect(scheduler.waiting.foreground == 0 && scheduler.waiting.background == 0)
    scheduler.release(id: 1, host: "h", slot: .foreground)
    #expect(scheduler.tryAcquire(id: 4, host: "h", priority: .foreground) == .foreground)
  }
}
