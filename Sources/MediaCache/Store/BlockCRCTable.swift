import Synchronization

/// The CRC-32s of the 16 KiB blocks of chunks read whole and found intact, so that a later read of a few
/// kilobytes of such a chunk reads and checks only the blocks it needs instead of the whole chunk.
///
/// A block CRC is computed only while its chunk is verified: the whole chunk is read, each block's CRC is
/// computed, and the blocks' CRCs combined (`crc32_combine`) must equal the chunk's CRC from the manifest,
/// in the same pass over the same bytes, before any of them is kept. A block that later passes its CRC
/// therefore holds the bytes the manifest's chunk CRC vouched for (invariant 1 with a smaller unit); a block
/// that fails drops the whole chunk, as a chunk that fails does. Entries are found only under the same data
/// file (device and inode), object version and chunk CRC as the manifest lists now (`VerifiedChunkCache.Key`),
/// so a rewritten chunk or a reset object never meets the blocks of the old one.
///
/// In memory only, 4 bytes per block (256 bytes per 1 MiB chunk), bounded by `capacity` chunks with the oldest
/// entry replaced first (16,384 chunks: 16 GiB of 1 MiB chunks in about 5 MiB): nothing is written to the
/// manifest, so the on-disk format is unchanged and a process that starts anew verifies each chunk whole once
/// more.
final class BlockCRCTable: Sendable {
  /// The table reads use.
  static let shared = BlockCRCTable(capacity: 1 << 14)
  /// Bytes per block. A chunk size that is not a larger multiple of it is always verified whole. 16 KiB: a
  /// 64 KiB range reads at most 80 KiB where 64 KiB blocks read 128 KiB (two blocks unless aligned); per 1 MiB
  /// chunk, 64 CRCs to keep and to compute when it is verified whole.
  static let blockSize = 16 << 10

  typealias Key = VerifiedChunkCache.Key

  private struct State {
    var entries: [Key: [UInt32]] = [:]
    /// Keys in insertion order, as a ring: `next` is where the next new key goes (and the oldest is).
    var order: [Key?]
    var next = 0
  }

  /// The most chunks kept.
  let capacity: Int
  private let state: Mutex<State>

  init(capacity: Int) {
    self.capacity = max(1, capacity)
    state = Mutex(State(order: Array(repeating: nil, count: max(1, capacity))))
  }

  /// Whether chunks of `chunkSize` bytes are verified by blocks.
  static func usesBlocks(chunkSize: Int) -> Bool { chunkSize > blockSize && chunkSize % blockSize == 0 }

  /// The block CRCs of the chunk `key` names, if it was verified whole since it was written.
  func crcs(for key: Key) -> [UInt32]? { state.withLock { $0.entries[key] } }

  /// Keeps the block CRCs of a chunk that was just verified whole.
  func insert(_ crcs: [UInt32], for key: Key) {
    state.withLock { state in
      guard state.entries.updateValue(crcs, forKey: key) == nil else { return }
      if let oldest = state.order[state.next] { state.entries[oldest] = nil }
      state.order[state.next] = key
      state.next = (state.next + 1) % state.order.count
    }
  }

  /// Forgets a chunk (it failed a check and was dropped).
  func remove(_ key: Key) { state.withLock { _ = $0.entries.removeValue(forKey: key) } }
}

extension FileHandleAssetDataManager {
  /// The size of a verification block (`BlockCRCTable`): a read of part of a chunk whose block CRCs are known
  /// reads and checks only the blocks it touches, so a consumer reading small pieces cuts them on these bounds.
  package static let verificationBlockSize = BlockCRCTable.blockSize
}
