import Synchronization

extension Flight {
  /// After an origin request ended without error: waits until the next one is due and returns true, or
  /// returns false when the flight is done (`FlightState.afterRequest`).
  func awaitNextRequest(objectLength: @Sendable () -> Int64?) async -> Bool {
    while true {
      if Task.isCancelled { return false }
      let length = objectLength()
      var decided: FlightState.AfterRequest?
      await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
          let (ready, replaced) = lock.withLock { inner -> (Bool, CheckedContinuation<Void, Never>?) in
            let next = inner.state.afterRequest(objectLength: length)
            if next != .wait || Task.isCancelled {
              decided = next
              return (true, nil)
            }
            defer { inner.demandWaiter = continuation }
            return (false, inner.demandWaiter)
          }
          replaced?.resume()
          if ready { continuation.resume() }
        }
      } onCancel: {
        lock.withLock { inner in
          defer { inner.demandWaiter = nil }
          return inner.demandWaiter
        }?.resume()
      }
      switch decided {
      case .request: return true
      case .stop: return false
      case .wait, nil: continue
      }
    }
  }
}
