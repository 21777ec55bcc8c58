import Synchronization
import Testing

@testable import MediaCacheHTTP

/// `ReadBudget`: bytes of cache reads held at once, taken without waiting while free, otherwise granted in the
/// order asked as releases free them.
@Suite struct ReadBudgetTests {
  @Test func takesWhatIsFreeAtOnceAndClampsToTheWholeBudget() async {
    let budget = ReadBudget(limit: 100)
    #expect(await budget.acquire(60) == 60)
    #expect(await budget.acquire(40) == 40)
    budget.release(100)
    #expect(await budget.acquire(1000) == 100)  // a piece larger than the budget takes all of it
    budget.release(100)
    #expect(await budget.acquire(-5) == 0)
  }

  @Test func waitersAreServedInTheOrderTheyAskedAsBytesComeBack() async throws {
    let budget = ReadBudget(limit: 100)
    #expect(await budget.acquire(90) == 90)
    let order = Order()
    // The first waiter wants 50, the second only 5: the second must not overtake the first although 10 are
    // free (a small reader never jumps the queue).
    let first = Task {
      _ = await budget.acquire(50)
      order.append(1)
    }
    while budget.waiting < 1 { await Task.yield() }
    let second = Task {
      _ = await budget.acquire(5)
      order.append(2)
    }
    while budget.waiting < 2 { await Task.yield() }
    #expect(order.items.isEmpty)
    budget.release(40)  // 50 free: the first waiter's 50, then the second must wait for 5 more
    await first.value
    #expect(order.items == [1])
    #expect(budget.waiting == 1)
    budget.release(5)
    await second.value
    #expect(order.items == [1, 2])
    #expect(budget.waiting == 0)
  }
}

/// The order in which waiters got their budget.
private final class Order: Sendable {
  private let list = Mutex<[Int]>([])
  func append(_ value: Int) { list.withLock { $0.append(value) } }
  var items: [Int] { list.withLock { $0 } }
}
