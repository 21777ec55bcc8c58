import Foundation
import Synchronization

/// Chunk-sized read buffers handed out as `Data` and taken back when the last `Data` sharing one is released,
/// so a streamed read does not allocate (and fault in) a fresh megabyte per chunk. A few free buffers per size
/// are kept; more are freed.
final class ReadBufferPool: Sendable {
  static let shared = ReadBufferPool()
  /// Free buffers kept per size.
  static let keptPerSize = 4

  /// Addresses of free buffers by size (as integers: raw pointers are not `Sendable`; the pool owns the memory).
  private let free = Mutex<[Int: [UInt]]>([:])

  /// A buffer of `count` bytes, filled by `fill` (which returns how many bytes it wrote), as a `Data` that gives
  /// the memory back to the pool when released.
  /// `capacity` (at least `count`) is the size of the buffer taken and kept: reads of varying lengths (spans)
  /// pass their chunk size, so the pool does not keep buffers of every length it ever saw.
  func data(count: Int, capacity: Int? = nil, fill: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows
    -> Data
  {
    let size = max(count, capacity ?? count)
    let pointer =
      free.withLock { $0[size]?.popLast() }.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
      ?? UnsafeMutableRawPointer.allocate(byteCount: max(size, 1), alignment: 16)
    let written: Int
    do {
      written = try fill(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    } catch {
      give(pointer, size: size)
      throw error
    }
    return Data(
      bytesNoCopy: pointer, count: written,
      deallocator: .custom { [self] pointer, _ in
        give(pointer, size: size)
      })
  }

  private func give(_ pointer: UnsafeMutableRawPointer, size: Int) {
    let address = UInt(bitPattern: pointer)
    let kept = free.withLock { free -> Bool in
      guard free[size, default: []].count < Self.keptPerSize else { return false }
      free[size, default: []].append(address)
      return true
    }
    if !kept { pointer.deallocate() }
  }
}
