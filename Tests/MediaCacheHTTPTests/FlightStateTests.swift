import NIOCore
import Testing

@testable import MediaCacheHTTP

/// Every transition of `FlightState`, the rules of one origin request shared by readers, driven directly: no
/// origin, no clock, no task.
@Suite struct FlightStateTests {
  static let chunk = 1000
  let t0 = ContinuousClock.now

  func flight(
    start: Int64 = 0, end: Int64? = nil, priority: ReadPriority = .foreground, readAhead: Int64 = 0,
    grace: Duration = .zero, window: Int64 = 0
  ) -> FlightState {
    FlightState(
      start: start, end: end, chunkSize: Self.chunk, priority: priority, readAhead: readAhead, grace: grace,
      window: window)
  }

  func bytes(_ count: Int, from first: UInt8 = 0) -> ByteBuffer {
    ByteBuffer(bytes: (0..<count).map { first &+ UInt8(truncatingIfNeeded: $0) })
  }

  func memory(_ next: FlightState.Next) -> [UInt8]? {
    guard case .piece(.memory(let buffers)) = next else { return nil }
    return buffers.flatMap { Array($0.readableBytesView) }
  }

  // MARK: Delivering and reading

  /// Bytes are kept with the object version they were written under: a delivery under another version (the
  /// object was reset, and the flight's next window is of the new one) lets the earlier bytes go, and so does a
  /// reader that finds the object at another version than the bytes held; bytes of the version asked about
  /// stay. A position whose bytes were let go is no longer served by the flight (it is before `bufferStart`).
  @Test func bytesOfAnotherVersionAreNeverHandedOver() {
    var state = flight()
    _ = state.deliver([bytes(300)], at: 0, version: 7, now: t0)
    #expect(state.bytesVersion == 7)
    #expect(state.discardBytes(unlessOf: 7).isEmpty)
    #expect(memory(state.next(from: 0, limit: 300)) == Array(bytes(300).readableBytesView))
    // Another version's bytes after them: only those are kept.
    _ = state.deliver([bytes(100, from: 50)], at: 300, version: 9, now: t0)
    #expect(state.bytesVersion == 9 && state.bufferStart == 300 && state.received == 400)
    #expect(state.inMemory(from: 0, limit: 300) == nil)
    guard case .piece(.disk) = state.next(from: 100, limit: 10) else {
      Issue.record("bytes of the earlier version were still served")
      return
    }
    #expect(memory(state.next(from: 300, limit: 100)) == Array(bytes(100, from: 50).readableBytesView))
    // A reader finds the object at version 11: nothing held is given to anyone, and the flight serves only
    // what is still to arrive.
    #expect(state.discardBytes(unlessOf: 11) == [.wake])
    #expect(state.bufferStart == 400 && state.inMemory(from: 300, limit: 100) == nil)
    #expect(!state.canServe(350, written: 400, now: t0))
    #expect(state.canServe(400, written: 400, now: t0))
  }

  @Test func bytesAreHandedOverFromMemoryAndOnlyTheIncompleteChunkIsKept() {
    var state = flight()
    #expect(state.deliver([bytes(600)], at: 0, now: t0) == [.wake])
    #expect(memory(state.next(from: 100, limit: 50)) == Array(bytes(50, from: 100).readableBytesView))
    // Into the second chunk: the first is complete in the cache, only the second's bytes stay in memory.
    _ = state.deliver([bytes(700, from: 88)], at: 600, now: t0)
    #expect(state.received == 1300)
    #expect(state.bufferStart == 1000)
    guard case .piece(.disk) = state.next(from: 500, limit: 100) else {
      Issue.record("a position in a completed chunk is read from the cache")
      return
    }
    #expect(memory(state.next(from: 1000, limit: 10))?.count == 10)
    #expect(state.parts.reduce(0) { $0 + $1.readableBytes } == 300)
  }

  /// A response's first bytes may be delivered while they are written only when they end inside the chunk they
  /// start in: then no position is sent to the cache (`bufferStart` stays) and every byte of the chunk from the
  /// flight's start comes from memory. Bytes that reach a chunk's end move the memory past it, and a reader
  /// behind would read the cache: those are delivered once written.
  @Test func firstBytesAreDeliveredWhileWrittenOnlyWithinTheirChunk() {
    #expect(FlightState.mayDeliverWhileWriting(from: 0, count: 999, chunkSize: Self.chunk))
    #expect(!FlightState.mayDeliverWhileWriting(from: 0, count: 1000, chunkSize: Self.chunk))
    #expect(FlightState.mayDeliverWhileWriting(from: 1200, count: 799, chunkSize: Self.chunk))
    #expect(!FlightState.mayDeliverWhileWriting(from: 1200, count: 800, chunkSize: Self.chunk))
    #expect(!FlightState.mayDeliverWhileWriting(from: 1999, count: 2, chunkSize: Self.chunk))
    #expect(!FlightState.mayDeliverWhileWriting(from: 0, count: 10, chunkSize: 0))
    // A flight from a chunk's start, one from the middle of a chunk, and a later request of a flight whose
    // earlier bytes filled a chunk and went on into the next: every position delivered comes from memory.
    for (start, before) in [(Int64(0), 0), (1200, 0), (0, 1300)] {
      var state = flight(start: start)
      if before > 0 { _ = state.deliver([bytes(before)], at: start, now: t0) }
      let bufferStart = state.bufferStart
      let count = Int(Int64(Self.chunk) - state.received % Int64(Self.chunk)) - 1
      #expect(FlightState.mayDeliverWhileWriting(from: state.received, count: count, chunkSize: Self.chunk))
      let unwrittenStart = state.received
      _ = state.deliverWhileWriting([bytes(count)], at: state.received, version: 3, now: t0)
      #expect(state.bufferStart == bufferStart && state.unwrittenEnd == state.received)
      #expect(state.bytesBeingWritten?.range == unwrittenStart..<state.received)
      #expect(state.bytesBeingWritten?.version == 3)
      for position in stride(from: bufferStart, to: state.received, by: 97) {
        #expect(memory(state.next(from: position, limit: 1)) != nil, "position \(position) from memory")
      }
      #expect(state.wroteDeliveredBytes() == [.wake] && state.unwrittenEnd == nil)
      #expect(state.bytesBeingWritten == nil)
      #expect(state.wroteDeliveredBytes().isEmpty)
    }
    // Bytes already delivered are not marked unwritten again (a retry's overlap).
    var overlap = flight()
    _ = overlap.deliver([bytes(500)], at: 0, now: t0)
    _ = overlap.deliverWhileWriting([bytes(300)], at: 200, version: 4, now: t0)
    #expect(overlap.unwrittenEnd == nil && overlap.received == 500)
    // A batch that reaches past what was delivered is being written from there, not from its start.
    _ = overlap.deliverWhileWriting([bytes(300)], at: 400, version: 4, now: t0)
    #expect(overlap.bytesBeingWritten?.range == 500..<700 && overlap.bytesBeingWritten?.version == 4)
    var crossing = flight()
    _ = crossing.deliver([bytes(1000)], at: 0, now: t0)
    guard case .piece(.disk) = crossing.next(from: 0, limit: 1) else {
      Issue.record("bytes that complete a chunk send a reader behind them to the cache")
      return
    }
  }

  @Test func bytesBeforeWhatArrivedAreNotDeliveredTwice() {
    var state = flight()
    _ = state.deliver([bytes(500)], at: 0, now: t0)
    // A retry's response overlaps what arrived: only the new bytes count.
    _ = state.deliver([bytes(300, from: 200)], at: 200, now: t0)
    #expect(state.received == 500)
    _ = state.deliver([bytes(300, from: 244)], at: 400, now: t0)
    #expect(state.received == 700)
    #expect(memory(state.next(from: 0, limit: 700))?.count == 700)
  }

  @Test func aReaderAtTheFrontWaitsAndAFailureReachesIt() {
    var state = flight()
    guard case .wait = state.next(from: 0, limit: 10) else {
      Issue.record("nothing arrived: wait")
      return
    }
    struct Broken: Error {}
    #expect(state.finish(.failure(Broken())) == [.wake])
    guard case .fail(let error) = state.next(from: 0, limit: 10) else {
      Issue.record("the flight failed: the reader is told")
      return
    }
    #expect(error is Broken)
    #expect(!state.isLive)
  }

  @Test func theEndOfTheRunAndASuccessfulFinishEndTheReader() {
    var state = flight(end: 1000)
    _ = state.deliver([bytes(1000)], at: 0, now: t0)
    guard case .piece(.end) = state.next(from: 1000, limit: 10) else {
      Issue.record("past the run's end: end")
      return
    }
    var open = flight()
    _ = open.deliver([bytes(10)], at: 0, now: t0)
    _ = open.finish(.success(()))
    guard case .piece(.end) = open.next(from: 10, limit: 10) else {
      Issue.record("finished: end")
      return
    }
    // With no reader attached, memory is let go at the finish: what arrived is read from the cache.
    guard case .piece(.disk) = open.next(from: 0, limit: 10) else {
      Issue.record("after the finish, bytes are read from the cache")
      return
    }
  }

  @Test func aSuccessfulFinishKeepsTheIncompleteChunkForTheReadersAttached() {
    // A reader attached when the request ends (its bytes arrived; it has not run yet) gets them from memory.
    var state = flight(end: 1500)
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.deliver([bytes(1200)], at: 0, now: t0)
    #expect(state.finish(.success(())) == [.wake])
    #expect(!state.isLive)
    #expect(
      memory(state.next(from: 1100, limit: 500)) == Array(Array(bytes(1200).readableBytesView)[1100...]))
    // The complete chunk before it is read from the cache, as while the flight ran; past what arrived: the end.
    guard case .piece(.disk) = state.next(from: 999, limit: 10) else {
      Issue.record("a complete chunk is read from the cache")
      return
    }
    guard case .piece(.end) = state.next(from: 1200, limit: 10) else {
      Issue.record("past what arrived: end")
      return
    }
    // A failure lets the memory go even with a reader attached: what arrived is read from the cache.
    var failed = flight()
    _ = failed.attach(priority: .foreground, written: 0)
    _ = failed.deliver([bytes(300)], at: 0, now: t0)
    _ = failed.finish(.failure(CancellationError()))
    guard case .piece(.disk) = failed.next(from: 100, limit: 10) else {
      Issue.record("after a failure, bytes are read from the cache")
      return
    }
  }

  @Test func bytesInMemoryAndBytesOnTheirWay() {
    var state = flight()
    _ = state.deliver([bytes(300)], at: 0, now: t0)
    #expect(
      state.inMemory(from: 100, limit: 50).map { $0.flatMap { Array($0.readableBytesView) } }
        == Array(bytes(50, from: 100).readableBytesView))
    #expect(state.inMemory(from: 300, limit: 50) == nil)  // not arrived
    #expect(state.inMemory(from: 100, limit: 0) == nil)
    // Written to 500 by the writer: 300..<500 are on their way; 500 is not written.
    #expect(state.isComing(300, written: 500) && state.isComing(499, written: 500))
    #expect(!state.isComing(500, written: 500) && !state.isComing(200, written: 500))
    // A hand-over that lags by more than two batches: read the cache instead of waiting.
    #expect(!state.isComing(300, written: 300 + FlightState.comingLag + 1))
    // A flight that ended brings nothing more.
    _ = state.finish(.success(()))
    #expect(!state.isComing(300, written: 500))
  }

  // MARK: Joining

  @Test func aReaderJoinsWithinTwoChunksOfWhatArrivedAndNotBehindTheMemory() {
    var state = flight(end: 10_000)
    #expect(state.canServe(0, written: 0, now: t0))
    #expect(state.canServe(2000, written: 0, now: t0))
    #expect(!state.canServe(2001, written: 0, now: t0))  // no rate yet
    #expect(state.canServe(2500, written: 500, now: t0))  // the writer got further than what was handed over
    #expect(!state.canServe(10_000, written: 0, now: t0))  // past the run
    _ = state.deliver([bytes(1200)], at: 0, now: t0)
    #expect(!state.canServe(500, written: 1200, now: t0))  // behind the memory: in the cache
  }

  @Test func aFastFlightIsJoinedFartherAheadByItsRate() {
    var state = flight()
    _ = state.deliver([bytes(1)], at: 0, now: t0)
    _ = state.deliver([bytes(99_999)], at: 1, now: t0)
    // 100 000 bytes in 0.1 s: 1 MB/s; 100 000 ahead takes 0.1 s, within the horizon; 200 000 does not.
    let later = t0 + .milliseconds(100)
    #expect(state.canServe(200_000, written: 100_000, now: later))
    #expect(!state.canServe(300_000, written: 100_000, now: later))
    // Too soon after the first byte to judge: wait the rest of the warm-up, once.
    #expect(state.warmUpRemaining(for: 500_000, now: t0 + .milliseconds(20)) == .milliseconds(30))
    #expect(state.warmUpRemaining(for: 500_000, now: t0 + .milliseconds(60)) == nil)
  }

  @Test func aForegroundReaderPromotesABackgroundFlightOnce() {
    var state = flight(priority: .background)
    #expect(state.attach(priority: .background, written: 0).promoted == false)
    #expect(state.attach(priority: .foreground, written: 0).promoted == true)
    #expect(state.priority == .foreground)
    #expect(state.attach(priority: .foreground, written: 0).promoted == false)
  }

  // MARK: Leaving

  @Test func theLastReaderAtTheEndOfItsRangeStopsTheRequestAtOnce() {
    // What arrived is cached (a chunk, and a span of the next): no need to finish the chunk.
    var state = flight()
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.deliver([bytes(1500)], at: 0, now: t0)
    #expect(state.detach(finishingChunk: true, written: 1500) == [.cancelRequest])
    #expect(!state.isLive)
  }

  @Test func aReaderDoneOnAChunkBoundaryOrABackgroundReaderStopsTheRequest() {
    var done = flight()
    _ = done.attach(priority: .foreground, written: 0)
    _ = done.deliver([bytes(1000)], at: 0, now: t0)
    #expect(done.detach(finishingChunk: true, written: 1000) == [.cancelRequest])
    #expect(!done.isLive)
    var prefetch = flight(priority: .background)
    _ = prefetch.attach(priority: .background, written: 0)
    _ = prefetch.deliver([bytes(300)], at: 0, now: t0)
    #expect(prefetch.detach(finishingChunk: false, written: 300) == [.cancelRequest])
  }

  @Test func anAbandonedFlightTakesItsGraceThenStopsWhereItsBytesEnd() {
    var state = flight(readAhead: 2500, grace: .milliseconds(250))
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.deliver([bytes(300)], at: 0, now: t0)
    // Bound: what arrived plus the read-ahead, at any byte: 2800.
    #expect(
      state.detach(finishingChunk: false, written: 300) == [
        .wake, .startGrace(.milliseconds(250), number: 1),
      ])
    #expect(state.end == 2800)
    #expect(state.graceRunning == 1)
    // Within the grace, bytes arrive up to 1700; when it ends the flight stops there (1700..<2000 is a span).
    _ = state.deliver([bytes(1400)], at: 300, now: t0)
    #expect(state.endGrace(of: 1, written: 1700) == [.cancelRequest, .wake])
    #expect(state.end == 1700)
    #expect(state.graceRunning == nil)
    #expect(!state.isLive)
  }

  @Test func withoutReadAheadAnAbandonedFlightStopsAtOnce() {
    var state = flight(readAhead: 0, grace: .milliseconds(250))
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.deliver([bytes(500)], at: 0, now: t0)
    #expect(state.detach(finishingChunk: false, written: 500) == [.cancelRequest, .wake])
    #expect(!state.isLive)
  }

  @Test func aGraceEndingWithEverythingWrittenStopsTheRequestAtOnce() {
    var state = flight(readAhead: 300, grace: .milliseconds(250))
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.deliver([bytes(500)], at: 0, now: t0)
    _ = state.detach(finishingChunk: false, written: 500)
    // The writer has already written up to 1000 (not yet handed over): nothing more to take.
    #expect(state.endGrace(of: 1, written: 1000) == [.cancelRequest, .wake])
    #expect(!state.isLive)
  }

  @Test func aReaderJoiningAnAbandonedFlightLiftsItsBoundAndAnOldGraceDoesNothing() {
    var state = flight(end: 9000, readAhead: 500, grace: .milliseconds(250))
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.deliver([bytes(500)], at: 0, now: t0)
    // 500 bytes in 10 ms: fast enough that a reader 3500 bytes ahead joins while a reader is attached.
    let soon = t0 + .milliseconds(10)
    #expect(state.canServe(4000, written: 500, now: soon))
    _ = state.detach(finishingChunk: false, written: 500)
    #expect(state.end == 1000)
    #expect(state.canServe(2500, written: 500, now: soon))  // within two chunks of what arrived
    #expect(!state.canServe(4000, written: 500, now: soon))  // farther, and past the bound it settled for
    #expect(state.attach(priority: .foreground, written: 500).actions == [.wake])
    #expect(state.end == 9000)
    #expect(state.graceRunning == nil)
    #expect(state.endGrace(of: 1, written: 500) == [])
    #expect(state.end == 9000)
  }

  @Test func aGraceOfAnEarlierAbandonmentDoesNothing() {
    var state = flight(readAhead: 5000, grace: .milliseconds(250))
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.detach(finishingChunk: false, written: 0)
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.detach(finishingChunk: false, written: 0)
    #expect(state.abandonment == 2)
    let end = state.end
    #expect(state.endGrace(of: 1, written: 0) == [])
    #expect(state.end == end)
  }

  @Test func withoutGraceAnAbandonedFlightSettlesAtOnce() {
    var state = flight(readAhead: 5000, grace: .zero)
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.deliver([bytes(200)], at: 0, now: t0)
    #expect(state.detach(finishingChunk: false, written: 200) == [.wake, .cancelRequest, .wake])
    #expect(state.end == 200)
    #expect(!state.isLive)
  }

  // MARK: Windows

  @Test func anUnwindowedFlightAsksForItsWholeRunOnce() {
    var state = flight(start: 300, end: 9000)
    _ = state.attach(priority: .foreground, written: 0)
    #expect(state.nextRequestEnd() == 9000)
    _ = state.deliver([bytes(8700)], at: 300, now: t0)
    #expect(state.afterRequest(objectLength: 20_000) == .stop)
    // Cut short (the origin ended early): the fetching task asks for the rest.
    var cut = flight(start: 0, end: 9000)
    _ = cut.attach(priority: .foreground, written: 0)
    _ = cut.deliver([bytes(100)], at: 0, now: t0)
    #expect(cut.afterRequest(objectLength: nil) == .request)
  }

  @Test func aWindowedFlightAsksAWindowAheadOfItsReaderAndGrowsWithWhatWasRead() {
    var state = flight(start: 500, window: 400)
    _ = state.attach(priority: .foreground, written: 0)
    // The first request: the window past the start.
    #expect(state.nextRequestEnd() == 900)
    _ = state.deliver([bytes(400)], at: 500, now: t0)
    // The reader is still far from the end of what arrived (more than half the window): wait.
    let moved = state.noteDemand(600)
    #expect(moved)
    #expect(state.afterRequest(objectLength: nil) == .wait)
    let back = state.noteDemand(550)
    #expect(!back, "demand never moves back")
    // Within half a window of the end: the next request, a window past what arrived.
    let nearer = state.noteDemand(700)
    #expect(nearer)
    #expect(state.afterRequest(objectLength: nil) == .request)
    #expect(state.nextRequestEnd() == 1300)
    // After 8000 bytes read the lead is an eighth of them: 1000.
    _ = state.deliver([bytes(7700)], at: 900, now: t0)
    _ = state.noteDemand(8500)
    #expect(state.afterRequest(objectLength: nil) == .request)
    #expect(state.nextRequestEnd() == 9600)
    // Never past the run's end or the object's.
    #expect(state.afterRequest(objectLength: 8600) == .stop)
    var bounded = flight(start: 0, end: 600, window: 400)
    _ = bounded.attach(priority: .foreground, written: 0)
    _ = bounded.noteDemand(500)
    #expect(bounded.nextRequestEnd() == 600)
  }

  @Test func aWindowedFlightWithoutReadersOrWithAWaitingReaderStopsWindowing() {
    var abandoned = flight(readAhead: 0, window: 400)
    _ = abandoned.attach(priority: .foreground, written: 0)
    _ = abandoned.deliver([bytes(400)], at: 0, now: t0)
    _ = abandoned.detach(finishingChunk: false, written: 400)
    #expect(abandoned.afterRequest(objectLength: nil) == .stop)
    // A prefetch joins: the rest of the run in one request.
    var prefetched = flight(end: 5000, window: 400)
    _ = prefetched.attach(priority: .foreground, written: 0)
    _ = prefetched.deliver([bytes(400)], at: 0, now: t0)
    #expect(prefetched.afterRequest(objectLength: nil) == .wait)
    _ = prefetched.dropWindow()
    #expect(prefetched.afterRequest(objectLength: nil) == .request)
    #expect(prefetched.nextRequestEnd() == 5000)
  }

  // MARK: Limits and cancelling

  @Test func aLimitNeverCutsWhatArrivedAndOnlyShortens() {
    var state = flight(end: 5000)
    _ = state.attach(priority: .foreground, written: 0)
    _ = state.deliver([bytes(2500)], at: 0, now: t0)
    #expect(state.limit(to: 2000, written: 2500) == [.wake])
    #expect(state.end == 2500)
    _ = state.limit(to: 4000, written: 2500)
    #expect(state.end == 2500)
  }

  @Test func cancellingFailsWaitingReadersWithCancellation() {
    var state = flight()
    #expect(state.cancel() == [.cancelRequest, .wake])
    guard case .fail(let error) = state.next(from: 0, limit: 1) else {
      Issue.record("cancelled: readers are told")
      return
    }
    #expect(error is CancellationError)
  }

  @Test func theHeadIsKeptAndWakesReaders() {
    var state = flight()
    #expect(state.setHead(OriginMetadata(length: 10, etag: "\"a\"")) == [.wake])
    #expect(state.head?.length == 10)
  }
}
