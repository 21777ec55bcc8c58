import Synchronization

/// A counting semaphore for origin requests: at most `limit` at once in the process (default 6).
actor RequestLimiter {
  let limit: Int

  /// The limiter shared by every `CachingReader` in the process that uses the same limit.
  static func shared(limit: Int) -> RequestLimiter {
    registry.withLock { limiters in
      if let existing = limiters[limit] { return existing }
      let limiter = RequestLimiter(limit: limit)
      limiters[limit] = limiter
      return limiter
    }
  }

  private static let registry = Mutex<[Int: RequestLimiter]>([:])
  private var running = 0
  private var queue: [CheckedContinuation<Void, Never>] = []

  init(limit: Int) { self.limit = max(1, limit) }

  func acquire() async {
    if running < limit {
      running += 1
      return
    }
    await withCheckedContinuation { queue.append($0) }
  }

  func release() {
    if queue.isEmpty {
      running -= 1
    } else {
      queue.removeFirst().resume()  // the slot passes straight to the next waiter
    }
  }
}
