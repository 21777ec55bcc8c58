import Synchronization

/// Objects of this process whose data manager is closing on the I/O executor (committing what it completed),
/// so that a question about one (`MediaCache.status`, `data`, `manifest`, …) or a new manager for it waits for
/// that commit instead of reading the manifest from before it. The read engine closes its managers this way
/// rather than on the task that ended the read.
package final class ClosingObjects: Sendable {
  private struct Entry {
    var closes = 0
    var waiters: [CheckedContinuation<Void, Never>] = []
  }
  private let entries = Mutex<[ObjectID: Entry]>([:])
  /// Readers that keep objects open between reads, asked to close them (one object, or all for nil) before
  /// this process removes or pins one: each starts the close (`begin`) before it returns.
  private let idleHolders = Mutex<[@Sendable (ObjectID?) -> Void]>([])

  package init() {}

  /// Registers a reader that keeps idle objects open (`CachingReader.Configuration.idleSessionLinger`).
  package func addIdleHolder(_ close: @escaping @Sendable (ObjectID?) -> Void) {
    idleHolders.withLock { $0.append(close) }
  }

  /// Asks the readers that keep `id` (every object, for nil) open while idle to close it; `wait(for:)` then
  /// waits for those closes too.
  package func closeIdle(_ id: ObjectID?) {
    for close in idleHolders.withLock({ $0 }) { close(id) }
  }

  /// A close of `id` is starting (call before handing it to the executor).
  package func begin(_ id: ObjectID) {
    entries.withLock { $0[id, default: Entry()].closes += 1 }
  }

  /// A close of `id` has finished.
  package func end(_ id: ObjectID) {
    let waiters = entries.withLock { entries -> [CheckedContinuation<Void, Never>] in
      guard var entry = entries[id] else { return [] }
      entry.closes -= 1
      if entry.closes > 0 {
        entries[id] = entry
        return []
      }
      entries[id] = nil
      return entry.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Returns once no close of `id` is running.
  package func wait(for id: ObjectID) async {
    await withCheckedContinuation { continuation in
      let waiting = entries.withLock { entries in
        guard entries[id] != nil else { return false }
        entries[id]!.waiters.append(continuation)
        return true
      }
      if !waiting { continuation.resume() }
    }
  }

  /// Returns once no close of any object that was closing when it was called is running.
  package func waitForAll() async {
    for id in entries.withLock({ Array($0.keys) }) { await wait(for: id) }
  }
}
