import Foundation
import NIOCore
import Testing

@testable import MediaCacheHTTP

/// The in-memory hand-over of one origin fetch (`Flight`), in particular when the origin's event loop skipped
/// handing bytes over because the fetching task fell behind: readers never get wrong or shifted bytes.
@Suite struct FlightTests {
  static func bytes(_ range: Range<Int>) -> Data { Data(range.map { UInt8(truncatingIfNeeded: $0 &* 7) }) }
  /// The bytes as an origin response's buffers: pieces of at most 3 bytes, each a slice of a larger buffer.
  static func parts(_ range: Range<Int>) -> [ByteBuffer] {
    stride(from: range.lowerBound, to: range.upperBound, by: 3).map { start in
      var storage = ByteBuffer(bytes: [0xEE, 0xEE])
      storage.writeBytes(bytes(start..<min(start + 3, range.upperBound)))
      storage.moveReaderIndex(forwardBy: 2)
      return storage
    }
  }
  static func joined(_ buffers: [ByteBuffer]) -> Data { CachedPiece.origin(buffers).data }

  @Test func deliveredBytesAreReadFromMemoryAndCompletedChunksFromTheCache() async throws {
    let flight = Flight(start: 0, end: nil, chunkSize: 10)
    await flight.deliver(Self.parts(0..<6), at: 0)
    guard case .memory(let first) = try await flight.next(from: 2, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(Self.joined(first) == Self.bytes(2..<6))
    await flight.deliver(Self.parts(6..<13), at: 6)  // chunk 0 complete: only chunk 1 stays in memory
    guard case .disk = try await flight.next(from: 5, limit: 100) else {
      Issue.record("expected disk for a completed chunk")
      return
    }
    guard case .memory(let second) = try await flight.next(from: 10, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(Self.joined(second) == Self.bytes(10..<13))
  }

  @Test func skippedBytesAreNeverServedFromMemoryAndLaterBytesKeepTheirOffsets() async throws {
    let flight = Flight(start: 0, end: nil, chunkSize: 10)
    await flight.deliver(Self.parts(0..<3), at: 0)
    await flight.skip(to: 7)  // bytes 3..<7 are in the cache's incomplete chunk only
    await flight.deliver(Self.parts(7..<9), at: 7)
    guard case .memory(let later) = try await flight.next(from: 7, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(Self.joined(later) == Self.bytes(7..<9))
    // Bytes before the skip (even those once in memory) wait for the cache; a finished flight sends the reader
    // to the cache.
    let reader = Task { try await flight.next(from: 1, limit: 100) }
    try await Task.sleep(for: .milliseconds(50))
    await flight.finish(.success(()))
    guard case .disk = try await reader.value else {
      Issue.record("expected the cache")
      return
    }
  }

  @Test func aReaderOfSkippedBytesWaitsForTheChunkAndThenReadsTheCache() async throws {
    let flight = Flight(start: 0, end: nil, chunkSize: 10)
    await flight.skip(to: 4)
    await flight.deliver(Self.parts(4..<8), at: 4)
    // Bytes 8..<10 are in memory from 4 on: offsets are those of the object.
    guard case .memory(let tail) = try await flight.next(from: 6, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(Self.joined(tail) == Self.bytes(6..<8))
    let reader = Task { try await flight.next(from: 2, limit: 100) }
    try await Task.sleep(for: .milliseconds(50))
    await flight.deliver(Self.parts(8..<12), at: 8)  // chunk 0 completes
    guard case .disk = try await reader.value else {
      Issue.record("a skipped byte must come from the cache once its chunk is complete")
      return
    }
    guard case .memory(let next) = try await flight.next(from: 10, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(Self.joined(next) == Self.bytes(10..<12))
  }

  /// Bytes the writer has written (`writtenHint`) but not yet handed over are waited for in memory; bytes it
  /// skipped, or that no longer come (the flight ended), are left to the cache; a successful finish keeps the
  /// incomplete chunk for the reader attached.
  @Test func heldBytesAreWaitedForWhileOnTheirWayAndLeftToTheCacheOtherwise() async throws {
    let flight = Flight(start: 0, end: 20, chunkSize: 10)
    _ = await flight.attach()
    await flight.deliver(Self.parts(0..<3), at: 0)
    #expect(await flight.held(from: 1, limit: 100).map(Self.joined) == Self.bytes(1..<3))
    // Not written yet: not held, not coming (the reader waits on the flight instead, as before).
    #expect(await flight.held(from: 3, limit: 100) == nil)
    // Written up to 6, handed over later: the reader waits for the hand-over, and is counted as blocked meanwhile.
    flight.writtenHint.store(6, ordering: .relaxed)
    let reader = Task { await flight.held(from: 4, limit: 100) }
    while flight.blockedReaders.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(1)) }
    await flight.deliver(Self.parts(3..<6), at: 3)
    #expect(await reader.value.map(Self.joined) == Self.bytes(4..<6))
    // Written up to 9 and then skipped (the fetching task fell behind): the waiting reader goes to the cache.
    flight.writtenHint.store(9, ordering: .relaxed)
    let skipped = Task { await flight.held(from: 7, limit: 100) }
    while flight.blockedReaders.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(1)) }
    await flight.skip(to: 9)
    #expect(await skipped.value == nil)
    // The request ends: what arrived of the incomplete chunk stays in memory for the attached reader.
    await flight.deliver(Self.parts(9..<14), at: 9)
    await flight.finish(.success(()))
    #expect(await flight.held(from: 11, limit: 2).map(Self.joined) == Self.bytes(11..<13))
    #expect(await flight.held(from: 14, limit: 100) == nil)
  }

  /// A retry's response overlaps what arrived: only the new bytes are kept, offsets stay those of the object,
  /// and a reader's limit cuts inside a buffer.
  @Test func overlappingDeliveriesAndLimitsKeepOffsets() async throws {
    let flight = Flight(start: 0, end: nil, chunkSize: 100)
    await flight.deliver(Self.parts(0..<6), at: 0)
    await flight.deliver(Self.parts(4..<11), at: 4)
    for (from, limit) in [(0, 5), (1, 100), (5, 4), (9, 1), (10, 50)] {
      guard case .memory(let got) = try await flight.next(from: Int64(from), limit: limit) else {
        Issue.record("expected memory from \(from)")
        return
      }
      #expect(Self.joined(got) == Self.bytes(from..<min(11, from + limit)), "from \(from) limit \(limit)")
    }
  }
}
