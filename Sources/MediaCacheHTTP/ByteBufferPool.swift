import NIOCore
import Synchronization

/// Buffers that pieces read from the cache are read into, taken back when their reader asks for its next
/// piece, so that serving cached bytes does not allocate (and fault in, and hand back to the kernel) a fresh
/// buffer of a megabyte or two per piece: measured with `tools/bench --only serve`, those page faults were a
/// fifth of the proxy's cycles.
///
/// A buffer given back may still be queued in NIO, on its way to a socket: its storage is then shared, and the
/// next write into it copies it to new storage first (NIO's copy on write), which is what a fresh allocation
/// costs anyway. The oldest buffer is taken first, the one most likely to be free by then.
final class ByteBufferPool: Sendable {
  /// Buffers kept.
  let kept: Int
  private let free = Mutex<[ByteBuffer]>([])

  init(kept: Int) { self.kept = kept }

  /// A buffer with room for `capacity` bytes, emptied; `capacity` rounded up to `minimumCapacity` for a new
  /// one, so that buffers serve reads of any size up to it.
  func take(capacity: Int, minimumCapacity: Int) -> ByteBuffer {
    if var buffer = free.withLock({ $0.isEmpty ? nil : $0.removeFirst() }), buffer.capacity >= capacity {
      buffer.clear()
      return buffer
    }
    return ByteBufferAllocator().buffer(capacity: max(capacity, minimumCapacity))
  }

  /// Takes `buffer` back (whatever slice of it a piece was): kept if fewer than `kept` are, else released.
  func give(_ buffer: ByteBuffer) {
    free.withLock { free in
      if free.count < kept { free.append(buffer) }
    }
  }
}
