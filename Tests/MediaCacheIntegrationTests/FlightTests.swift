import Foundation
import Testing

@testable import MediaCacheHTTP

/// The in-memory hand-over of one origin fetch (`Flight`), in particular when the origin's event loop skipped
/// handing bytes over because the fetching task fell behind: readers never get wrong or shifted bytes.
@Suite struct FlightTests {
  static func bytes(_ range: Range<Int>) -> Data { Data(range.map { UInt8(truncatingIfNeeded: $0 &* 7) }) }

  @Test func deliveredBytesAreReadFromMemoryAndCompletedChunksFromTheCache() async throws {
    let flight = Flight(start: 0, end: nil, chunkSize: 10)
    await flight.deliver(Self.bytes(0..<6), at: 0)
    guard case .memory(let first) = try await flight.next(from: 2, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(first == Self.bytes(2..<6))
    await flight.deliver(Self.bytes(6..<13), at: 6)  // chunk 0 complete: only chunk 1 stays in memory
    guard case .disk = try await flight.next(from: 5, limit: 100) else {
      Issue.record("expected disk for a completed chunk")
      return
    }
    guard case .memory(let second) = try await flight.next(from: 10, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(second == Self.bytes(10..<13))
  }

  @Test func skippedBytesAreNeverServedFromMemoryAndLaterBytesKeepTheirOffsets() async throws {
    let flight = Flight(start: 0, end: nil, chunkSize: 10)
    await flight.deliver(Self.bytes(0..<3), at: 0)
    await flight.skip(to: 7)  // bytes 3..<7 are in the cache's incomplete chunk only
    await flight.deliver(Self.bytes(7..<9), at: 7)
    guard case .memory(let later) = try await flight.next(from: 7, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(later == Self.bytes(7..<9))
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
    await flight.deliver(Self.bytes(4..<8), at: 4)
    // Bytes 8..<10 are in memory from 4 on: offsets are those of the object.
    guard case .memory(let tail) = try await flight.next(from: 6, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(tail == Self.bytes(6..<8))
    let reader = Task { try await flight.next(from: 2, limit: 100) }
    try await Task.sleep(for: .milliseconds(50))
    await flight.deliver(Self.bytes(8..<12), at: 8)  // chunk 0 completes
    guard case .disk = try await reader.value else {
      Issue.record("a skipped byte must come from the cache once its chunk is complete")
      return
    }
    guard case .memory(let next) = try await flight.next(from: 10, limit: 100) else {
      Issue.record("expected memory")
      return
    }
    #expect(next == Self.bytes(10..<12))
  }
}
