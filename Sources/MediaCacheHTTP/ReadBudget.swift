import Synchronization

/// Bytes of cache reads in progress, across every read of a `CachingReader`: a read takes budget for a piece's
/// buffer before reading it from disk and gives it back when its consumer asks for the next piece (the proxy:
/// once it has handed the piece to its writer, which may still hold it until the socket takes it, up to 2 MiB
/// queued per response). Under many concurrent readers of cached objects the reads running ahead of the
/// writers are bounded by the budget rather than by the number of readers; what the writers hold is not (a
/// paused player would otherwise hold budget every other reader waits for). Readers are served in the order
/// they asked (first come, first served: no reader waits behind later ones).
///
/// The proxy bounds the bytes of its immediate hits in flight with one as well
/// (`ProxyServer.Configuration.hitBytesInFlight`).
///
/// The fast path (budget free, nobody waiting) takes one lock and never suspends.
package final class ReadBudget: Sendable {
  /// The budget, bytes.
  package let limit: Int64

  private struct State {
    var available: Int64
    var waiters: [(bytes: Int64, continuation: CheckedContinuation<Void, Never>)] = []
  }
  private let state: Mutex<State>

  package init(limit: Int64) {
    self.limit = max(1, limit)
    state = Mutex(State(available: max(1, limit)))
  }

  /// Takes `bytes` (at most the whole budget: a larger piece takes all of it), waiting until they are free and
  /// every earlier waiter is served. Returns what was taken, to give back with `release(_:)`.
  package func acquire(_ bytes: Int64) async -> Int64 {
    let wanted = min(max(bytes, 0), limit)
    let taken = state.withLock { state -> Bool in
      guard state.waiters.isEmpty, state.available >= wanted else { return false }
      state.available -= wanted
      return true
    }
    if taken { return wanted }
    await withCheckedContinuation { continuation in
      let now = state.withLock { state -> Bool in
        if state.waiters.isEmpty, state.available >= wanted {
          state.available -= wanted
          return true
        }
        state.waiters.append((wanted, continuation))
        return false
      }
      if now { continuation.resume() }
    }
    return wanted
  }

  /// Readers waiting for budget now.
  package var waiting: Int { state.withLock { $0.waiters.count } }

  /// Gives back `bytes` taken by `acquire(_:)`, and wakes the waiters they (and what was free) now cover, in
  /// order.
  package func release(_ bytes: Int64) {
    guard bytes > 0 else { return }
    let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.available += bytes
      var woken: [CheckedContinuation<Void, Never>] = []
      while let first = state.waiters.first, first.bytes <= state.available {
        state.available -= first.bytes
        woken.append(state.waiters.removeFirst().continuation)
      }
      return woken
    }
    for continuation in woken { continuation.resume() }
  }
}
