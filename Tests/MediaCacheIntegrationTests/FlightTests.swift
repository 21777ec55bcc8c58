import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import MediaCacheHTTP

/// The in-memory hand-over of one origin fetch (`Flight`): readers never get wrong or shifted bytes, a wait is
/// ended by a hand-over made from any thread (the origin's event loop, the I/O thread that wrote the bytes),
/// and a cancelled wait ends at once without leaving a count or a waiter behind.
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
    flight.deliver(Self.parts(0..<6), at: 0, version: 0)
    guard case .memory(let first) = try await flight.next(from: 2, limit: 100).piece else {
      Issue.record("expected memory")
      return
    }
    #expect(Self.joined(first) == Self.bytes(2..<6))
    flight.deliver(Self.parts(6..<13), at: 6, version: 0)  // chunk 0 complete: only chunk 1 stays in memory
    guard case .disk = try await flight.next(from: 5, limit: 100).piece else {
      Issue.record("expected disk for a completed chunk")
      return
    }
    guard case .memory(let second) = try await flight.next(from: 10, limit: 100).piece else {
      Issue.record("expected memory")
      return
    }
    #expect(Self.joined(second) == Self.bytes(10..<13))
  }

  /// Bytes the writer has written (`writtenHint`) but not yet handed over are waited for in memory, for one change
  /// of the flight; bytes that no longer come (the flight ended) are left to the cache; a successful finish keeps the
  /// incomplete chunk for the reader attached.
  @Test func heldBytesAreWaitedForWhileOnTheirWayAndLeftToTheCacheOtherwise() async throws {
    let flight = Flight(start: 0, end: 20, chunkSize: 10)
    flight.attach()
    flight.deliver(Self.parts(0..<3), at: 0, version: 0)
    #expect(await flight.held(from: 1, limit: 100).map { Self.joined($0.buffers) } == Self.bytes(1..<3))
    // Not written yet: not held, not coming (the reader waits on the flight instead, as before).
    #expect(await flight.held(from: 3, limit: 100)?.buffers == nil)
    // Written up to 6, handed over later: the reader waits for the hand-over, and is counted as blocked meanwhile.
    flight.writtenHint.store(6, ordering: .relaxed)
    let reader = Task { await flight.held(from: 4, limit: 100)?.buffers }
    while flight.blockedReaders.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(1)) }
    flight.deliver(Self.parts(3..<6), at: 3, version: 0)
    #expect(await reader.value.map(Self.joined) == Self.bytes(4..<6))
    // Written up to 9, and another change comes first (a later run's flight limits this one): the waiting reader
    // goes to the cache rather than wait again.
    flight.writtenHint.store(9, ordering: .relaxed)
    let overtaken = Task { await flight.held(from: 7, limit: 100)?.buffers }
    while flight.blockedReaders.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(1)) }
    flight.limit(to: 18)
    #expect(await overtaken.value == nil)
    #expect(flight.blockedReaders.load(ordering: .relaxed) == 0)
    // The request ends: what arrived of the incomplete chunk stays in memory for the attached reader.
    flight.deliver(Self.parts(9..<14), at: 9, version: 0)
    flight.finish(.success(()))
    #expect(await flight.held(from: 11, limit: 2).map { Self.joined($0.buffers) } == Self.bytes(11..<13))
    #expect(await flight.held(from: 14, limit: 100)?.buffers == nil)
  }

  /// A retry's response overlaps what arrived: only the new bytes are kept, offsets stay those of the object,
  /// and a reader's limit cuts inside a buffer.
  @Test func overlappingDeliveriesAndLimitsKeepOffsets() async throws {
    let flight = Flight(start: 0, end: nil, chunkSize: 100)
    flight.deliver(Self.parts(0..<6), at: 0, version: 0)
    flight.deliver(Self.parts(4..<11), at: 4, version: 0)
    for (from, limit) in [(0, 5), (1, 100), (5, 4), (9, 1), (10, 50)] {
      guard case .memory(let got) = try await flight.next(from: Int64(from), limit: limit).piece else {
        Issue.record("expected memory from \(from)")
        return
      }
      #expect(Self.joined(got) == Self.bytes(from..<min(11, from + limit)), "from \(from) limit \(limit)")
    }
  }

  /// Readers waiting at the front are woken by bytes handed over from a plain thread (no task, as the delegate's
  /// event loop and the I/O executor hand them over), and each gets its own position's bytes.
  @Test func aHandOverFromAnyThreadWakesEveryWaitingReader() async throws {
    let flight = Flight(start: 0, end: 30, chunkSize: 10, playerWaits: PlayerWaits(), attached: true)
    let readers = (0..<4).map { k in Task { try await flight.next(from: Int64(k), limit: 100).piece } }
    while flight.blockedReaders.load(ordering: .relaxed) < 4 { try await Task.sleep(for: .milliseconds(1)) }
    #expect(flight.playerWaits?.waited(within: .seconds(60)) == true)
    let thread = Thread { flight.deliver(Self.parts(0..<6), at: 0, version: 0) }
    thread.start()
    for (k, reader) in readers.enumerated() {
      guard case .memory(let got) = try await reader.value else {
        Issue.record("reader \(k): expected memory")
        continue
      }
      #expect(Self.joined(got) == Self.bytes(k..<6), "reader \(k)")
    }
    #expect(flight.blockedReaders.load(ordering: .relaxed) == 0)
  }

  /// A reader whose task is cancelled while it waits gets CancellationError at once and leaves nothing behind:
  /// the flight goes on serving the others.
  @Test func aCancelledWaitEndsAtOnceAndLeavesTheFlightServing() async throws {
    let flight = Flight(start: 0, end: 30, chunkSize: 10, attached: true)
    let cancelled = Task { try await flight.next(from: 0, limit: 100).piece }
    let other = Task { try await flight.next(from: 0, limit: 100).piece }
    while flight.blockedReaders.load(ordering: .relaxed) < 2 { try await Task.sleep(for: .milliseconds(1)) }
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(flight.blockedReaders.load(ordering: .relaxed) == 1)
    flight.deliver(Self.parts(0..<3), at: 0, version: 0)
    guard case .memory(let got) = try await other.value else {
      Issue.record("expected memory")
      return
    }
    #expect(Self.joined(got) == Self.bytes(0..<3))
    // A task cancelled before it asks does not wait either.
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await flight.next(from: 3, limit: 100).piece
    }
    await #expect(throws: CancellationError.self) { try await early.value }
    #expect(flight.blockedReaders.load(ordering: .relaxed) == 0)
  }

  /// The fetching task waits for its windowed flight's reader to come near, is woken when the reader asks
  /// further, and stops waiting when cancelled.
  @Test func theNextWindowWaitsForDemandAndForCancellation() async throws {
    final class Flag: Sendable {
      private let value = Atomic<Bool>(false)
      var raised: Bool { value.load(ordering: .relaxed) }
      func raise() { value.store(true, ordering: .relaxed) }
    }
    let flight = Flight(start: 0, end: 1000, chunkSize: 1000, window: 100, attached: true)
    flight.deliver([ByteBuffer(repeating: 1, count: 100)], at: 0, version: 0)
    let answered = Flag()
    let due = Task {
      defer { answered.raise() }
      return await flight.awaitNextRequest(objectLength: { 1000 })
    }
    // The reader at 0 with 100 bytes arrived and a window of 100: not due yet.
    try await Task.sleep(for: .milliseconds(50))
    #expect(!answered.raised)
    // The reader moves to 60: within half a window of what arrived, so the next request is due.
    guard case .memory = try await flight.next(from: 60, limit: 10).piece else {
      Issue.record("expected memory")
      return
    }
    #expect(await due.value)
    // That request brings 200 bytes more: the reader at 60 is far behind, and the fetching task waits again
    // until it is cancelled.
    flight.deliver([ByteBuffer(repeating: 2, count: 200)], at: 100, version: 0)
    let waiting = Task { await flight.awaitNextRequest(objectLength: { 1000 }) }
    try await Task.sleep(for: .milliseconds(50))
    waiting.cancel()
    #expect(await waiting.value == false)
  }

  /// A reader joins a flight only if it can serve it, in one step: not one whose last reader finished (closing)
  /// or that was cancelled. A foreground reader joining a background flight promotes it, once.
  @Test func aReaderJoinsOnlyAFlightThatCanServeIt() {
    let flight = Flight(start: 0, end: 20, chunkSize: 10, priority: .background, attached: true)
    #expect(flight.join(at: 0, priority: .foreground) == true)
    let background = flight.isBackground.load(ordering: .relaxed)
    #expect(!background)
    #expect(flight.join(at: 5) == false)
    #expect(flight.join(at: 20) == nil)  // past the run
    let closing = Flight(start: 0, end: 20, chunkSize: 10, attached: true)
    closing.detach(finishingChunk: true)
    #expect(closing.join(at: 0) == nil)
    let cancelled = Flight(start: 0, end: 20, chunkSize: 10, attached: true)
    cancelled.cancel()
    #expect(cancelled.join(at: 0) == nil)
  }

  /// A flight cancelled before its fetching task was set (a cancel that found no task to stop) stops the task
  /// as soon as it is set; a live flight's task is left running.
  @Test func aTaskSetAfterTheCancelIsCancelled() async {
    let flight = Flight(start: 0, end: 20, chunkSize: 10, attached: true)
    flight.cancel()
    let task = Task { _ = try? await Task.sleep(for: .seconds(30)) }
    flight.setTask(task)
    #expect(task.isCancelled)
    let live = Flight(start: 0, end: 20, chunkSize: 10, attached: true)
    let running = Task { _ = try? await Task.sleep(for: .seconds(30)) }
    live.setTask(running)
    #expect(!running.isCancelled)
    running.cancel()
  }

  /// The head and the bytes that came with it are one change: a reader waiting for one change (`held`) gets
  /// the bytes, not just the head.
  @Test func theHeadAndItsFirstBytesAreOneChange() async throws {
    let flight = Flight(start: 0, end: 20, chunkSize: 10, attached: true)
    flight.writtenHint.store(6, ordering: .relaxed)
    let reader = Task { await flight.held(from: 0, limit: 100)?.buffers }
    while flight.blockedReaders.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(1)) }
    flight.setHead(
      OriginMetadata(length: 20, etag: "\"a\""), delivering: Self.parts(0..<6), at: 0, version: 0)
    #expect(await reader.value.map(Self.joined) == Self.bytes(0..<6))
    #expect(flight.head != nil)
  }

  /// An abandoned flight's grace ends on the timers' event loop, not in a task of Swift's cooperative pool
  /// (which a busy process starves): the request is cancelled from that loop once the grace is over.
  @Test func aGraceEndsOnTheTimersEventLoop() async throws {
    final class Seen: Sendable {
      private let value = Mutex<Bool?>(nil)
      private let waiting = Atomic<Bool>(false)
      var onLoop: Bool? { value.withLock { $0 } }
      func note(_ onLoop: Bool) { value.withLock { $0 = onLoop } }
      /// Whether the fetching task waits inside its cancellation handler (a cancel before that would run the
      /// handler on the task's own thread when it starts).
      var isWaiting: Bool { waiting.load(ordering: .relaxed) }
      func noteWaiting() { waiting.store(true, ordering: .relaxed) }
    }
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop = group.next()
    let flight = Flight(
      start: 0, end: nil, chunkSize: 10, readAhead: 100, grace: .milliseconds(50), attached: true,
      timers: group)
    flight.deliver(Self.parts(0..<4), at: 0, version: 0)
    let seen = Seen()
    let fetching = Task {
      await withTaskCancellationHandler {
        seen.noteWaiting()
        _ = try? await Task.sleep(for: .seconds(30))
      } onCancel: {
        seen.note(loop.inEventLoop)
      }
    }
    flight.setTask(fetching)
    while !seen.isWaiting { try await Task.sleep(for: .milliseconds(1)) }
    let left = ContinuousClock.now
    flight.detach()  // the reader leaves early: a grace, then a stop where the bytes end
    #expect(flight.isLive)
    await fetching.value
    #expect(seen.onLoop == true)
    #expect(ContinuousClock.now - left >= .milliseconds(50))
    #expect(!flight.isLive && flight.end == 4)
    try await group.shutdownGracefully()
  }
}

/// A flight that holds bytes of a version the object is no longer at (another flight's response found the
/// origin changed and reset the object) gives none of them to a reader: found in a review (2026-12-05), the
/// bytes a flight kept in memory carried no version, and a reader of the new version took them.
@Suite struct FlightVersionTests {
  @Test func aReaderOfTheNewVersionNeverGetsBytesAnIdleFlightHeldOfTheOld() async throws {
    let chunk = 65536
    var configuration = CachingReader.Configuration()
    // Windowed flights: the first reader's flight fetches 100,000 bytes, then waits for its reader to come
    // near, the incomplete second chunk's bytes (65,536 to 100,000) in memory.
    configuration.originRequestWindow = 100_000
    try await withReader(chunkSize: chunk, configuration: configuration) { reader, origin, _ in
      let size = 40 * chunk
      let name = "versions-in-memory"
      // A slow origin after the first 40,000 bytes of each response: 16 KiB every 400 ms.
      let url = origin.url(.slow, name, size: size, query: "delay-ms=400&burst=40000")
      // Reader A: its first piece, then it pauses (its read stays open, its flight waits for it).
      let first = try await reader.read(url, range: .bounded(0..<Int64(size)))
      var iterator = first.makeAsyncIterator()
      _ = try await iterator.next()
      // The flight's window has arrived.
      try await Task.sleep(for: .seconds(2.5))
      #expect(origin.requests(for: name).count == 1)
      // The origin changes. Reader B asks for a range far ahead: the origin answers its If-Range with the new
      // version whole (a 200), which resets the object; its bytes come slowly.
      origin.setVersion(name: name, to: 1)
      let far = Task {
        let bytes = try await reader.read(url, range: .bounded(Int64(30 * chunk)..<Int64(31 * chunk)))
        defer { bytes.close() }
        for try await _ in bytes {}
      }
      defer { far.cancel() }
      for _ in 0..<200 where origin.requests(for: name).count < 2 {
        try await Task.sleep(for: .milliseconds(10))
      }
      try await Task.sleep(for: .milliseconds(200))
      // Reader C: a range in the chunk the first flight holds in memory, which the new version's response has
      // not reached yet. Its bytes are the new version's, or the read fails; never the old version's.
      let behind: Range<Int> = 66_000..<90_000
      let old = TestOrigin.bytes(name: name, size: size, range: behind)
      let new = TestOrigin.bytes(name: name, size: size, version: 1, range: behind)
      let third = try await reader.read(
        url, range: .bounded(Int64(behind.lowerBound)..<Int64(behind.upperBound)))
      var thirdBytes: [UInt8] = []
      do {
        for try await piece in third { thirdBytes += piece }
        let isNew = thirdBytes == new
        let isOld = thirdBytes == old
        #expect(isNew, "\(thirdBytes.count) bytes, the old version's: \(isOld)")
      } catch {
        let isOld = !thirdBytes.isEmpty && thirdBytes == Array(old.prefix(thirdBytes.count))
        #expect(!isOld, "the old version's bytes before \(error)")
      }
      third.close()
      first.close()
    }
  }
}
