import Synchronization

/// A counting semaphore (an object session uses one of 1 to choose or start flights one at a time). Origin
/// requests are scheduled by `RequestScheduler`.
///
/// A slot that is free is taken without suspending, and a release is synchronous: as an actor, each
/// uncontended take was a hop onto the actor (from a task on `IOExecutor`, a job queued there and another
/// thread woken, 0.1–0.2 ms of a miss's time to first byte) and each release a new task.
final class RequestLimiter: Sendable {
  let limit: Int

  private struct State {
    var running = 0
    var queue: [(id: Int, continuation: CheckedContinuation<Bool, Never>)] = []
    var nextID = 0
  }
  private let state = Mutex(State())

  init(limit: Int) { self.limit = max(1, limit) }

  /// Tasks waiting for a slot now.
  var waiting: Int { state.withLock { $0.queue.count } }

  /// Takes a slot, waiting for one; a task cancelled while waiting throws CancellationError without one.
  func acquire() async throws {
    // A free slot is taken here; else the waiter's number, for a withdrawal.
    let waiter = state.withLock { state -> Int? in
      guard state.running >= limit else {
        state.running += 1
        return nil
      }
      defer { state.nextID += 1 }
      return state.nextID
    }
    guard let id = waiter else { return }
    let granted = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let resumeNow: Bool? = state.withLock { state in
          if Task.isCancelled { return false }
          // A release may have come between the first look and now.
          if state.running < limit {
            state.running += 1
            return true
          }
          state.queue.append((id, continuation))
          return nil
        }
        if let resumeNow { continuation.resume(returning: resumeNow) }
      }
    } onCancel: {
      withdraw(id)
    }
    guard granted else { throw CancellationError() }
  }

  private func withdraw(_ id: Int) {
    let withdrawn = state.withLock { state in
      state.queue.firstIndex { $0.id == id }.map { state.queue.remove(at: $0).continuation }
    }
    withdrawn?.resume(returning: false)
  }

  func release() {
    let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
      if state.queue.isEmpty {
        state.running -= 1
        return nil
      }
      return state.queue.removeFirst().continuation  // the slot passes straight to the next waiter
    }
    next?.resume(returning: true)  // outside the lock
  }
}
