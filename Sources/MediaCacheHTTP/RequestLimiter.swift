/// A counting semaphore (an object session uses one of 1 to choose or start flights one at a time). Origin
/// requests are scheduled by `RequestScheduler`.
actor RequestLimiter {
  let limit: Int

  private var running = 0
  private var queue: [(id: Int, continuation: CheckedContinuation<Bool, Never>)] = []
  private var nextID = 0

  init(limit: Int) { self.limit = max(1, limit) }

  /// Takes a slot, waiting for one; a task cancelled while waiting throws CancellationError without one.
  func acquire() async throws {
    if running < limit {
      running += 1
      return
    }
    let id = nextID
    nextID += 1
    let granted = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        if Task.isCancelled {
          continuation.resume(returning: false)
        } else {
          queue.append((id, continuation))
        }
      }
    } onCancel: {
      Task { await self.withdraw(id) }
    }
    guard granted else { throw CancellationError() }
  }

  private func withdraw(_ id: Int) {
    guard let index = queue.firstIndex(where: { $0.id == id }) else { return }
    queue.remove(at: index).continuation.resume(returning: false)
  }

  func release() {
    if queue.isEmpty {
      running -= 1
    } else {
      queue.removeFirst().continuation.resume(returning: true)  // the slot passes straight to the next waiter
    }
  }
}
