import NIOCore
import Testing

@testable import MediaCacheHTTP

/// Every decision of `ReadCursorState`: where a reader's next bytes come from.
@Suite struct ReadCursorStateTests {
  typealias Object = ReadCursorState.Object

  /// The object as seen from `state`'s position: its chunk present (cached to the chunk's end) or not.
  func object(_ state: ReadCursorState, length: Int64? = 10_000, version: UInt32 = 7, present: Bool) -> Object
  {
    let position = state.position
    let chunkEnd = min((position / 1000 + 1) * 1000, length ?? .max)
    return Object(
      contentLength: length, versionTag: version,
      cachedRun: present ? max(0, chunkEnd - position) : 0)
  }

  @Test func aSpanIsReadFromTheCacheUpToItsEndOrTheRange() {
    var state = ReadCursorState(range: 1500..<1800, attached: false)
    let r1 = state.next(Object(contentLength: 10_000, versionTag: 7, cachedRun: 120))
    #expect(r1 == .readCache(1500..<1620))
    state.delivered(120, versionTag: 7)
    // Past the span: a flight.
    let r2 = state.next(Object(contentLength: 10_000, versionTag: 7, cachedRun: 0))
    #expect(r2 == .findFlight)
    var long = ReadCursorState(range: 1500..<1550, attached: false)
    let r3 = long.next(Object(contentLength: 10_000, versionTag: 7, cachedRun: 400))
    #expect(r3 == .readCache(1500..<1550))
  }

  @Test func aPresentChunkIsReadFromTheCacheUpToItsEndOrTheRange() {
    var state = ReadCursorState(range: 1500..<1800, attached: false)
    let r1 = state.next(object(state, present: true))
    #expect(r1 == .readCache(1500..<1800))
    var open = ReadCursorState(range: 1500..<Int64.max, attached: false)
    let r2 = open.next(object(open, present: true))
    #expect(r2 == .readCache(1500..<2000))
    // The object ends inside the chunk.
    let r3 = open.next(object(open, length: 1700, present: true))
    #expect(r3 == .readCache(1500..<1700))
  }

  @Test func aMissingChunkFindsAFlightOrAsksTheAttachedOne() {
    var state = ReadCursorState(range: 0..<5000, attached: false)
    let r4 = state.next(object(state, present: false))
    #expect(r4 == .findFlight)
    state.setAttached(true)
    let r5 = state.next(object(state, present: false))
    #expect(r5 == .checkFlight)
  }

  @Test func theRangeEndsAtItsBoundOrTheObjectsEnd() {
    var state = ReadCursorState(range: 0..<1000, attached: true)
    state.delivered(1000, versionTag: 7)
    let r6 = state.next(object(state, present: false))
    #expect(r6 == .finished)
    var open = ReadCursorState(range: 0..<Int64.max, attached: true)
    open.delivered(600, versionTag: 7)
    let r7 = open.next(object(open, length: 600, present: false))
    #expect(r7 == .finished)
    let r8 = open.next(object(open, length: nil, present: false))
    #expect(r8 == .checkFlight)
  }

  @Test func aNewVersionAfterTheFirstByteIsAnErrorNotAMix() {
    var state = ReadCursorState(range: 0..<5000, attached: false)
    // Before any byte: the reader simply reads the new version.
    let r9 = state.next(object(state, version: 8, present: true))
    #expect(r9 == .readCache(0..<1000))
    state.delivered(1000, versionTag: 8)
    let r10 = state.next(object(state, version: 9, present: true))
    #expect(r10 == .versionChanged)
    let r11 = state.next(object(state, version: 8, present: true))
    #expect(r11 == .readCache(1000..<2000))
  }

  /// A reader whose consumer was told of a version (a proxy's response head) takes no byte of another, even
  /// before its first byte; a pin after a byte was delivered changes nothing.
  @Test func aPinnedVersionIsTheOnlyOneDelivered() {
    var pinned = ReadCursorState(range: 0..<5000, attached: false)
    pinned.pin(8)
    #expect(pinned.next(object(pinned, version: 9, present: true)) == .versionChanged)
    #expect(pinned.next(object(pinned, version: 8, present: true)) == .readCache(0..<1000))
    var unpinned = ReadCursorState(range: 0..<5000, attached: false)
    #expect(unpinned.next(object(unpinned, version: 9, present: true)) == .readCache(0..<1000))
    unpinned.delivered(1000, versionTag: 9)
    unpinned.pin(8)
    #expect(unpinned.versionSeen == 9)
  }

  @Test func bytesTheFlightWroteButTheCacheLostNeedANewFlight() {
    var state = ReadCursorState(range: 0..<5000, attached: true)
    state.flightWrotePosition(cached: true)
    let r12 = state.next(object(state, present: false))
    #expect(r12 == .checkFlight)
    state.flightWrotePosition(cached: false)
    let r13 = state.next(object(state, present: false))
    #expect(r13 == .findFlight)
    // Once.
    state.setAttached(true)
    let r14 = state.next(object(state, present: false))
    #expect(r14 == .checkFlight)
  }

  @Test func aFlightThatEndedEndsTheReadOnlyAtTheObjectsEnd() {
    var state = ReadCursorState(range: 0..<Int64.max, attached: true)
    state.delivered(400, versionTag: 7)
    let r15 = state.flightEnded(contentLength: 1000)
    #expect(!r15)
    #expect(!state.attached)
    let r16 = state.next(object(state, length: 1000, present: false))
    #expect(r16 == .findFlight)
    state.setAttached(true)
    state.delivered(600, versionTag: 7)
    let r17 = state.flightEnded(contentLength: 1000)
    #expect(r17)
  }

  @Test func flightBytesAreCutAtTheEndOfTheRangeWithoutCopying() {
    var state = ReadCursorState(range: 100..<350, attached: true)
    let first = ByteBuffer(bytes: Array(repeating: 1, count: 200))
    let second = ByteBuffer(bytes: Array(repeating: 2, count: 200))
    let trimmed = state.trimmed([first, second], contentLength: nil)
    #expect(trimmed.map(\.readableBytes) == [200, 50])
    state.delivered(200, versionTag: 7)
    #expect(state.trimmed([second], contentLength: 320).map(\.readableBytes) == [20])
  }
}
