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

  package init() {}

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
