import NIOCore
import Synchronization

/// Buffers that pieces read from the cache are read into, taken back when their reader asks for its next
/// piece, so that serving cached bytes does not allocate (and fault in, and hand back to the kernel) a fresh
/// buffer per piece: measured with `tools/bench --only serve`, those page faults were a fifth of the proxy's
/// cycles.
///
/// Buffers come in power-of-two sizes from 64 KiB (a verification block) up, and each size keeps at most
/// `bytesPerSize` bytes of free buffers (at least four buffers), so that reads of a few blocks (a 64 KiB range)
/// reuse warm 128 KiB buffers many readers at once, while megabyte buffers for whole chunks stay few: what the
/// pool holds for good is bounded by the sizes in use, not by the number of readers.
///
/// A buffer given back may still be queued in NIO, on its way to a socket: its storage is then shared, and the
/// next write into it copies it to new storage first (NIO's copy on write), which is what a fresh allocation
/// costs anyway. The oldest buffer of a size is taken first, the one most likely to be free by then.
final class ByteBufferPool: Sendable {
  /// Free bytes kept per buffer size.
  let bytesPerSize: Int
  private let free = Mutex<[Int: [ByteBuffer]]>([:])

  /// The smallest buffer: one verification block.
  static let smallestSize = 64 << 10

  init(bytesPerSize: Int) { self.bytesPerSize = bytesPerSize }

  /// The size of the buffers that serve a read of `count` bytes: the power of two at least `count`, 64 KiB
  /// at least.
  static func size(for count: Int) -> Int {
    guard count > smallestSize else { return smallestSize }
    return 1 << (Int.bitWidth - (count - 1).leadingZeroBitCount)
  }

  /// An empty buffer with room for `count` bytes.
  func take(capacity count: Int) -> ByteBuffer {
    let size = Self.size(for: count)
    let reused = free.withLock { free -> ByteBuffer? in
      guard var buffers = free[size], !buffers.isEmpty else { return nil }
      let buffer = buffers.removeFirst()
      free[size] = buffers
      return buffer
    }
    if var buffer = reused {
      buffer.clear()
      return buffer
    }
    return ByteBufferAllocator().buffer(capacity: size)
  }

  /// Takes `buffer` back (whatever slice of it a piece was): kept if its size has room, else released.
  func give(_ buffer: ByteBuffer) {
    let size = buffer.capacity
    guard size >= Self.smallestSize, size & (size - 1) == 0 else { return }
    let limit = max(4, bytesPerSize / size)
    free.withLock { free in
      if free[size, default: []].count < limit { free[size, default: []].append(buffer) }
    }
  }
}
