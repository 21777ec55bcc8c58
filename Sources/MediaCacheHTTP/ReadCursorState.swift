import MediaCache
import NIOCore

/// The position of one reader of a `CachedBytes` range and every decision about where its next bytes come
/// from, as a value: the cache, a flight it is attached to, a new flight, or nowhere (the end). `ReadCursor`
/// holds it and does what it says (reads the cache on the I/O executor, joins or leaves flights); the
/// decisions are tested on their own (`ReadCursorStateTests`).
struct ReadCursorState {
  /// What the cache says about the object right now.
  struct Object {
    var contentLength: Int64?
    var versionTag: UInt32
    /// Bytes cached from the reader's position on, within the chunk holding it (a present chunk, or a span of
    /// an incomplete one), or up to a chunk's worth into the next chunk when both are present (the cursor
    /// decides): 0 if that byte is not cached.
    var cachedRun: Int64
  }

  /// What the reader does next.
  enum Step: Equatable {
    /// The range is delivered: leave the flight (letting it finish the chunk it is in) and end.
    case finished
    /// The object changed version after this reader delivered bytes of the old one.
    case versionChanged
    /// Read `range` (in one present chunk or one span, or across into the next chunk when it is present) from
    /// the cache.
    case readCache(Range<Int64>)
    /// Leave the flight, if any, and join or start one for the position.
    case findFlight
    /// Ask the flight attached whether it still serves the position (it does: `readFlight`; if not: leave it
    /// and look again).
    case checkFlight
  }

  /// Bytes this reader's range covers (upper bound `Int64.max` while the length is unknown).
  let range: Range<Int64>
  private(set) var position: Int64
  /// The object's version tag whose metadata the reader's consumer was given (`pin`), else the one when it
  /// delivered its first byte.
  private(set) var versionSeen: UInt32?
  /// Whether a flight is attached.
  private(set) var attached: Bool
  /// The flight attached answered "read it from the cache" for a chunk the cache no longer has: a new flight.
  private var needsNewFlight = false

  init(range: Range<Int64>, attached: Bool) {
    self.range = range
    self.position = range.lowerBound
    self.attached = attached
  }

  /// The consumer was told of version `version` (validators, length): bytes of another one are never delivered.
  /// Does nothing once a version is seen.
  mutating func pin(_ version: UInt32) { if versionSeen == nil { versionSeen = version } }

  /// The next step, given the object as the cache knows it now.
  mutating func next(_ object: Object) -> Step {
    let end = min(range.upperBound, object.contentLength ?? .max)
    if position >= end { return .finished }
    if let versionSeen, object.versionTag != versionSeen { return .versionChanged }
    if object.cachedRun > 0 {
      return .readCache(position..<min(end, position + object.cachedRun))
    }
    if !attached || needsNewFlight {
      needsNewFlight = false
      return .findFlight
    }
    return .checkFlight
  }

  /// A flight was joined or started (`true`), or none was needed after all (`false`: the chunk completed
  /// meanwhile), or the flight attached was left.
  mutating func setAttached(_ attached: Bool) { self.attached = attached }

  /// `count` bytes were handed to the consumer; `versionTag` is the object's version now.
  mutating func delivered(_ count: Int, versionTag: UInt32) {
    position += Int64(count)
    if versionSeen == nil { versionSeen = versionTag }
  }

  /// The flight's bytes for the position, cut at the end of the range.
  func trimmed(_ buffers: [ByteBuffer], contentLength: Int64?) -> [ByteBuffer] {
    var remaining = min(range.upperBound, contentLength ?? .max) - position
    var usable: [ByteBuffer] = []
    usable.reserveCapacity(buffers.count)
    for buffer in buffers where remaining > 0 {
      let take = Int(min(Int64(buffer.readableBytes), remaining))
      usable.append(
        take == buffer.readableBytes ? buffer : buffer.getSlice(at: buffer.readerIndex, length: take)!)
      remaining -= Int64(take)
    }
    return usable
  }

  /// The flight said the byte at the position is in the cache; `cached`: whether the cache has it now.
  mutating func flightWrotePosition(cached: Bool) {
    if !cached { needsNewFlight = true }
  }

  /// The flight ended before the position. Returns true when that is the object's end (the read is over).
  mutating func flightEnded(contentLength: Int64?) -> Bool {
    attached = false
    return contentLength.map { position >= $0 } == true
  }
}
