import MediaCache
import NIOCore
import Synchronization

/// Buffers that pieces read from the cache are read into, taken back when their reader asks for its next
/// piece, so that serving cached bytes does not allocate (and fault in, and hand back to the kernel) a fresh
/// buffer per piece: measured with `tools/bench --only serve`, those page faults were a fifth of the proxy's
/// cycles.
///
/// Two kinds: reads of a few verification blocks (at most `smallLimit`) get buffers of a
/// power-of-two size from 16 KiB, kept `smallBytesPerSize` bytes per size (many readers at once reuse warm
/// buffers); larger reads get buffers of at least their chunks' whole extent (so that any read of them fits),
/// `largeKept` of them kept: every buffer kept is memory held for good.
///
/// A buffer given back while something else still holds it (NIO, a closure, a piece kept by its reader) has
/// shared storage, and the next read into it allocates new storage first (NIO's copy on write), which is what
/// a fresh allocation costs anyway, while the old storage lives on. So consumers give buffers back once nothing
/// else holds them (the proxy: `ReturningBuffer`, after NIO wrote them). The oldest buffer is taken first, the
/// one most likely to be free by then.
final class ByteBufferPool: Sendable {
  /// Free large buffers kept.
  let largeKept: Int
  /// Free bytes of small buffers kept per size.
  let smallBytesPerSize: Int
  private struct Free {
    var small: [Int: [ByteBuffer]] = [:]
    var large: [ByteBuffer] = []
  }
  private let free = Mutex(Free())

  /// The smallest buffer: one verification block (a response past its server's bound reads pieces of two).
  static let smallestSize = 16 << 10
  /// The largest read served by a small buffer.
  static let smallLimit = 256 << 10

  init(largeKept: Int, smallBytesPerSize: Int) {
    self.largeKept = largeKept
    self.smallBytesPerSize = smallBytesPerSize
  }

  /// The size of the small buffers that serve a read of `count` bytes: the power of two at least `count`,
  /// 16 KiB at least.
  static func smallSize(for count: Int) -> Int {
    guard count > smallestSize else { return smallestSize }
    return 1 << (Int.bitWidth - (count - 1).leadingZeroBitCount)
  }

  /// An empty buffer with room for `capacity` bytes; a new large one has room for `minimumCapacity` (the
  /// whole chunks of the read), so that it serves any later read of as many chunks.
  func take(capacity: Int, minimumCapacity: Int) -> ByteBuffer {
    if capacity <= Self.smallLimit {
      let size = Self.smallSize(for: capacity)
      let reused = free.withLock { free -> ByteBuffer? in
        guard free.small[size]?.isEmpty == false else { return nil }
        return free.small[size]!.removeFirst()
      }
      if var buffer = reused {
        buffer.clear()
        return buffer
      }
      return ByteBufferAllocator().buffer(capacity: size)
    }
    if var buffer = free.withLock({ $0.large.isEmpty ? nil : $0.large.removeFirst() }),
      buffer.capacity >= capacity
    {
      buffer.clear()
      return buffer
    }
    return ByteBufferAllocator().buffer(capacity: max(capacity, minimumCapacity))
  }

  /// Takes `buffer` back (whatever slice of it a piece was): kept if its kind has room, else released.
  func give(_ buffer: ByteBuffer) {
    let capacity = buffer.capacity
    guard capacity >= Self.smallestSize else { return }
    free.withLock { free in
      if capacity < 2 * Self.smallLimit {
        // Its size is the largest power of two it holds: the allocator may give a little more than asked.
        let size = 1 << (Int.bitWidth - 1 - capacity.leadingZeroBitCount)
        if free.small[size, default: []].count < max(1, smallBytesPerSize / size) {
          free.small[size, default: []].append(buffer)
        }
      } else if free.large.count < largeKept {
        free.large.append(buffer)
      }
    }
  }
}

extension ByteBufferPool {
  /// Reads what `plan` says from `manager` into a buffer of this pool and checks it there (no copy after the
  /// read); the buffer's readable bytes are the plan's range. `minimumCapacity` is the whole chunks' extent (see
  /// `take`). Blocks on the disk; a buffer whose read or check failed comes back to the pool, and the error
  /// (`corruptChunk`, `closed`, `io`) is thrown.
  /// With `onlyIfResident`, reads with `readVerifiedIfResident` (no blocking call) and throws `NotResident` when
  /// that declines.
  func readVerified(
    _ plan: VerifiedReadPlan, from manager: FileHandleAssetDataManager, minimumCapacity: Int,
    onlyIfResident: Bool = false
  ) throws -> ByteBuffer {
    var buffer = take(capacity: plan.extent.count, minimumCapacity: minimumCapacity)
    do {
      _ = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: plan.extent.count) { pointer in
        if !onlyIfResident {
          try manager.readVerified(plan, into: pointer)
        } else if !manager.readVerifiedIfResident(plan, into: pointer) {
          throw NotResident()
        }
        return plan.extent.count
      }
    } catch {
      give(buffer)
      throw error
    }
    buffer.moveReaderIndex(forwardBy: plan.offset)
    buffer.moveWriterIndex(to: plan.offset + plan.range.count)
    return buffer
  }
}

/// A read asked to be made only from the page cache found some byte not there (or declined for another
/// reason: see `FileHandleAssetDataManager.readVerifiedIfResident`).
struct NotResident: Error {}
