import Foundation
import Synchronization

/// The in-memory tier: whole small objects, least recently used evicted first once their total cost (bytes)
/// passes the limit. Safe to use from any thread.
public final class MemoryTier: Sendable {
  /// The most bytes held at once.
  public let costLimit: Int

  private struct Entry {
    var data: Data
    var previous: ObjectID?
    var next: ObjectID?
  }

  private struct Storage {
    var entries: [ObjectID: Entry] = [:]
    var newest: ObjectID?
    var oldest: ObjectID?
    var totalCost = 0

    mutating func unlink(_ id: ObjectID) {
      guard let entry = entries[id] else { return }
      if let previous = entry.previous { entries[previous]?.next = entry.next } else { newest = entry.next }
      if let next = entry.next { entries[next]?.previous = entry.previous } else { oldest = entry.previous }
      entries[id]?.previous = nil
      entries[id]?.next = nil
    }

    mutating func pushNewest(_ id: ObjectID) {
      entries[id]?.next = newest
      entries[id]?.previous = nil
      if let newest { entries[newest]?.previous = id }
      newest = id
      if oldest == nil { oldest = id }
    }

    mutating func remove(_ id: ObjectID) {
      guard let entry = entries[id] else { return }
      unlink(id)
      entries[id] = nil
      totalCost -= entry.data.count
    }
  }

  private let storage = Mutex(Storage())

  /// A tier holding at most `costLimit` bytes.
  public init(costLimit: Int) { self.costLimit = costLimit }

  /// The object's bytes if held, marking it most recently used.
  public func data(for id: ObjectID) -> Data? {
    storage.withLock { storage in
      guard let entry = storage.entries[id] else { return nil }
      storage.unlink(id)
      storage.pushNewest(id)
      return entry.data
    }
  }

  /// Holds `data` for `id`, evicting the least recently used objects to stay within the limit. An object larger
  /// than the whole limit is not held. Returns whether it is held.
  @discardableResult
  public func insert(_ data: Data, for id: ObjectID) -> Bool {
    storage.withLock { storage in
      storage.remove(id)
      guard data.count <= costLimit else { return false }
      storage.entries[id] = Entry(data: data)
      storage.pushNewest(id)
      storage.totalCost += data.count
      while storage.totalCost > costLimit, let oldest = storage.oldest { storage.remove(oldest) }
      return true
    }
  }

  /// Forgets `id`.
  public func remove(_ id: ObjectID) { storage.withLock { $0.remove(id) } }

  /// Forgets everything; returns the bytes released.
  @discardableResult
  public func removeAll() -> Int {
    storage.withLock { storage in
      let cost = storage.totalCost
      storage = Storage()
      return cost
    }
  }

  /// Bytes held now.
  public var totalCost: Int { storage.withLock { $0.totalCost } }

  /// Number of objects held now.
  public var count: Int { storage.withLock { $0.entries.count } }
}
