import Foundation
import Synchronization

/// The first and last chunks of recently read objects, kept after they passed their CRC check so that a player
/// re-reading the head or the tail of a file for its index (every open, every seek of some players) is served
/// without reading and checking them again. An entry is found only under the same data file (device and inode) and the object's
/// version and the chunk's CRC as the manifest lists them now, so a reset object or a rewritten chunk never
/// gets bytes of the old one, nor one store bytes of another; the bytes kept are the bytes that were checked.
final class VerifiedChunkCache: Sendable {
  static let shared = VerifiedChunkCache(costLimit: 4 << 20, entryLimit: 32)

  struct Key: Hashable, Sendable {
    var file: FileIdentity
    var version: UInt32
    var chunk: Int
    var crc: UInt32
  }

  private struct Entry {
    var data: Data
    var lastUse: UInt64
  }

  private struct State {
    var entries: [Key: Entry] = [:]
    var cost = 0
    var clock: UInt64 = 0
  }

  let costLimit: Int
  let entryLimit: Int
  private let state = Mutex(State())

  init(costLimit: Int, entryLimit: Int) {
    self.costLimit = costLimit
    self.entryLimit = entryLimit
  }

  func data(for key: Key) -> Data? {
    state.withLock { state in
      guard var entry = state.entries[key] else { return nil }
      state.clock += 1
      entry.lastUse = state.clock
      state.entries[key] = entry
      return entry.data
    }
  }

  func insert(_ data: Data, for key: Key) {
    guard data.count <= costLimit / 4 else { return }  // a chunk this large would push out everything else
    state.withLock { state in
      state.clock += 1
      if let old = state.entries.updateValue(Entry(data: data, lastUse: state.clock), forKey: key) {
        state.cost -= old.data.count
      }
      state.cost += data.count
      // Few entries: a scan for the least recently used one is cheaper than keeping an order.
      while state.cost > costLimit || state.entries.count > entryLimit,
        let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })
      {
        state.cost -= oldest.value.data.count
        state.entries[oldest.key] = nil
      }
    }
  }

  func removeAll() { state.withLock { $0 = State() } }
}

/// A file on this machine: its device and inode.
struct FileIdentity: Hashable, Sendable {
  var device: UInt64
  var inode: UInt64
}
