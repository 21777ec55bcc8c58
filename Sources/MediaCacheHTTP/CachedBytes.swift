import Foundation
import MediaCache
import NIOCore
import Synchronization

/// The bytes of one read (`CachingReader.read`): an async sequence of pieces of at most one chunk, in order.
/// While it exists the object is open (no process evicts it).
public final class CachedBytes: AsyncSequence, Sendable {
  /// Each element is a piece of at most one chunk.
  public typealias Element = Data

  let session: ObjectSession
  /// The absolute bytes this read covers (its upper bound is `Int64.max` while the length is unknown).
  public let range: Range<Int64>
  /// The flight `read` started to learn the length, handed to the first cursor (already attached).
  private let initialFlight: Mutex<Flight?>

  /// The length learned when the read was resolved, for when the cache has not recorded it yet.
  private let lengthHint: Int64?
  /// What was cached, or received and being written, when the read opened (for a later read of one request,
  /// when the request began: `CachingReader.read(_:range:priority:after:)`), of the version it delivers
  /// (nothing, where the object was reset while it opened): bytes outside it count as fetched from the origin
  /// for this read, even when a flight wrote them to the cache before this reader got to them. Made once:
  /// every piece delivered is counted against it.
  let atHandAtOpen: BytesAtHand
  /// Who waits for this read's bytes: the flights it starts or joins are scheduled accordingly.
  let priority: ReadPriority
  /// The manifest whose metadata (`length`, `count`, `etag`, `lastModified`, `contentType`) this read reported,
  /// fixed by the first question: only that version's bytes are delivered after it (a proxy's head is made
  /// first: found by tools/soak). A version change after that is followed only before the first byte; after
  /// it, the rest comes from the origin under the version's strong ETag (`OriginTail`), or the read ends with
  /// `OriginError.objectChanged`.
  private let shown = Mutex<Manifest?>(nil)

  init(
    session: ObjectSession, range: Range<Int64>, initialFlight: Flight?, lengthHint: Int64? = nil,
    atHandAtOpen: BytesAtHand, priority: ReadPriority = .foreground,
    revalidation: Revalidation = .notNeeded
  ) {
    self.revalidation = revalidation
    self.priority = priority
    self.session = session
    self.range = range
    self.initialFlight = Mutex(initialFlight)
    self.lengthHint = lengthHint
    self.atHandAtOpen = atHandAtOpen
  }

  private func shownManifest() -> Manifest {
    shown.withLock { shown in
      if let shown { return shown }
      let now = session.manager.manifest
      shown = now
      return now
    }
  }

  /// The version whose metadata this read reported, if it was asked.
  var shownVersion: UInt32? { shown.withLock { $0?.versionTag } }

  func takeInitialFlight() -> Flight? {
    initialFlight.withLock { flight in
      defer { flight = nil }; return flight
    }
  }

  private let closed = Atomic<Bool>(false)
  private let diskBytes = Atomic<Int64>(0)
  private let originBytes = Atomic<Int64>(0)

  /// Bytes this read has delivered from the cache's files so far.
  public var bytesFromCache: Int64 { diskBytes.load(ordering: .relaxed) }
  /// Bytes this read has delivered straight from an origin response so far.
  public var bytesFromOrigin: Int64 { originBytes.load(ordering: .relaxed) }

  func noteDelivered(_ count: Int, fromOrigin: Bool) {
    CacheMetrics.noteServed(count, fromOrigin: fromOrigin)
    if fromOrigin {
      originBytes.add(Int64(count), ordering: .relaxed)
    } else {
      diskBytes.add(Int64(count), ordering: .relaxed)
    }
  }

  deinit { close() }

  /// Ends the read: commits what was fetched and releases the object (also done on deinit).
  public func close() {
    guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
    // A hit or a miss (`CacheMetrics`) by what the read delivered; a prefetch delivers nothing and is neither.
    CacheMetrics.noteRead(fromCache: bytesFromCache, fromOrigin: bytesFromOrigin)
    if let flight = takeInitialFlight() { flight.detach() }
    session.endRead()
  }

  /// Ends the read, as `close()` does, and returns once what this process fetched of the object is committed
  /// (unless a flight still running on it, or another read, keeps it open: then when that ends). `close()`
  /// hands the commit to the I/O executor and returns at once; a question to the cache about the object
  /// (`MediaCache.status`, `data`, …) waits for it either way.
  public func closeAndCommit() async {
    close()
    await session.waitUntilCommitted()
  }

  /// The object's total length, once known.
  public var length: Int64? { shownManifest().contentLength ?? liveLength }
  /// The length as the cache knows it now, without fixing the version this read reports.
  private var liveLength: Int64? { session.manager.contentLength ?? lengthHint }
  /// The bytes this read will deliver, once the length is known.
  public var count: Int64? {
    guard range.upperBound != .max else { return length.map { Swift.max(0, $0 - range.lowerBound) } }
    return Int64(range.count)
  }
  /// What the cache recorded from the origin, for the version this read delivers.
  public var contentType: String? { shownManifest().contentType }
  /// The origin's entity tag as the cache recorded it (quotes, any `W/`), for the version this read delivers.
  public var etag: String? { shownManifest().etag }
  /// The origin's `Last-Modified` header value, as the cache recorded it, for the version this read delivers.
  public var lastModified: String? { shownManifest().lastModified }
  /// The origin response's end-to-end header fields as the cache stored them (nil: none recorded), for the
  /// version this read delivers.
  public var storedHeaders: StoredHeaders? { shownManifest().storedHeaders }
  /// The URL the origin's response came from when a redirect led there (nil: the URL read), for the version
  /// this read delivers: what relative references in a playlist or MPD resolve against.
  public var responseURL: String? { shownManifest().storedHeaders?.responseURL }
  /// The response's age and freshness now (nil: none recorded), for the version this read delivers.
  public var freshness: ObjectFreshness? {
    session.freshness(of: shownManifest())?.view(at: Date())
  }
  /// What the read did about the freshness of the bytes it found cached.
  public let revalidation: Revalidation

  /// Bytes of the range cached now.
  var cachedBytes: Int64 { cachedBytes(in: session.manager.manifest) }

  /// Bytes of the range that were at hand when the read opened (for a later read of one request, when the
  /// request began): cached, or being written by a flight of this process (`BytesAtHand`).
  package var cachedBytesAtOpen: Int64 { cachedBytes(in: atHandAtOpen.ranges) }

  /// Counts `count` bytes delivered from `position`, from the cache's files or a flight's memory alike: those
  /// cached or received when the read opened as from the cache, the rest as fetched from the origin for this
  /// read, byte by byte (a piece can start in bytes that were at hand and go on past them).
  func noteDelivered(_ count: Int, at position: Int64) {
    let atHand = Int(atHandAtOpen.ranges.intersection(position..<(position + Int64(count))).count)
    if atHand > 0 { noteDelivered(atHand, fromOrigin: false) }
    if count > atHand { noteDelivered(count - atHand, fromOrigin: true) }
  }

  /// The bytes of the range cached since the read opened (by its flights, or any other writer of the object).
  var rangesCachedSinceOpen: [Range<Int64>] {
    let end = range.upperBound == .max ? (liveLength ?? range.lowerBound) : range.upperBound
    guard end > range.lowerBound else { return [] }
    let now = session.manager.manifest.presentByteRanges.intersection(range.lowerBound..<end)
    return now.subtracting(atHandAtOpen.ranges).ranges
  }

  /// The cached object's id.
  package var objectID: ObjectID { session.manager.objectID }

  private func cachedBytes(in manifest: Manifest) -> Int64 { cachedBytes(in: manifest.presentByteRanges) }

  private func cachedBytes(in present: ByteRangeSet) -> Int64 {
    let end = range.upperBound == .max ? (liveLength ?? range.lowerBound) : range.upperBound
    guard end > range.lowerBound else { return 0 }
    return present.intersection(range.lowerBound..<end).count
  }

  /// An iterator over the range from its first byte; each iterator reads the range on its own.
  public func makeAsyncIterator() -> Iterator { Iterator(cursor: ReadCursor(owner: self)) }

  /// Caches every missing byte of the range, one flight per missing run, without reading what is cached or
  /// copying any byte to this task (for prefetch).
  func fillMissing() async throws {
    let manager = session.manager
    var position = range.lowerBound
    var stalled = 0
    while true {
      try Task.checkCancellation()
      let manifest = manager.manifest
      // Without a known length, until the flight finds the end.
      let end = manifest.contentLength.map { Swift.min(range.upperBound, $0) } ?? range.upperBound
      guard position < end else { return }
      let cached = manifest.cachedRun(at: position)
      if cached > 0 {
        position += cached
        stalled = 0
        continue
      }
      let flight: Flight
      if let initial = takeInitialFlight() {
        flight = initial
      } else if let joined = await session.flight(
        for: position, upTo: end == .max ? nil : end, priority: priority, windowed: false)
      {
        flight = joined
      } else {
        continue  // cached meanwhile: the manifest says so on the next look
      }
      do {
        try await flight.waitForEnd()
      } catch {
        flight.detach()
        throw error
      }
      flight.detach()
      if manager.manifest.cachedRun(at: position) == 0 {
        stalled += 1
        if stalled > 3 {
          throw OriginError.inconsistentResponse(
            url: session.url, reason: "bytes \(position)- could not be cached")
        }
      }
    }
  }

  func progress(fetched: Int64, since start: Date) -> PrefetchProgress {
    let elapsed = Swift.max(Date().timeIntervalSince(start), 0.001)
    let total = count ?? 0
    return PrefetchProgress(
      cachedBytes: cachedBytes, totalBytes: total, fetchedBytes: fetched,
      bytesPerSecond: Double(fetched) / elapsed, fetchedRanges: rangesCachedSinceOpen)
  }

  /// Pulls one piece at a time, so memory stays at about one chunk however slow the consumer.
  public struct Iterator: AsyncIteratorProtocol, Sendable {
    let cursor: ReadCursor
    /// The next piece as `Data` (bytes from the origin are copied into it once).
    public mutating func next() async throws -> Data? { try await cursor.next()?.data }
    /// The next piece as it is held: a consumer that writes to NIO (the proxy) sends the cache's and the
    /// origin's buffers without copying them. A piece from the cache holds part of the reader's budget of
    /// bytes read from disk (`CachingReader.Configuration.cacheReadBudget`) until the next call, so ask for the
    /// next piece once this one is written.
    public mutating func nextPiece() async throws -> CachedPiece? { try await cursor.next() }
    /// `nextPiece()` for a consumer that takes each piece whole: it gives the piece's buffer back itself
    /// (`CachingReader.recycle(_:)`) once it is done with it (the proxy, once NIO has written it to the socket;
    /// `nextPiece()` takes it back at the next call, when a writer may still hold it, and a pool's next write
    /// into it would copy it first), and the piece's share of the read budget is given back at once, so the
    /// consumer bounds what it holds itself (the proxy: `QueuedBytes`). A consumer that waits on a slow client
    /// then holds no budget that other readers wait for.
    /// A piece is at most `limit` bytes (a chunk's worth at the most), and at most what `sizing` allows: a
    /// consumer that holds pieces for slow clients asks for small ones while it holds many.
    package mutating func nextOwnedPiece(atMost limit: Int = .max, sizing: (any PieceSizing)? = nil)
      async throws -> CachedPiece?
    {
      let piece = try await cursor.next(atMost: limit, sizing: sizing)
      cursor.disownLastPiece()
      return piece
    }
  }
}

/// One piece of a read: at most a chunk's worth of bytes.
public enum CachedPiece: Sendable {
  /// Bytes read from the cache's files, CRC-verified in this very buffer (the whole chunks holding them were
  /// read into it and checked there; the buffer's readable bytes are the piece).
  case disk(ByteBuffer)
  /// Bytes straight from an origin response (written to the cache, or being written), as slices of its buffers.
  case origin([ByteBuffer])

  /// Bytes in the piece.
  public var count: Int {
    switch self {
    case .disk(let buffer): buffer.readableBytes
    case .origin(let buffers): buffers.reduce(0) { $0 + $1.readableBytes }
    }
  }

  /// The bytes as one `Data`.
  public var data: Data {
    switch self {
    case .disk(let buffer): return Data(buffer.readableBytesView)
    case .origin(let buffers):
      if buffers.count == 1 { return Data(buffers[0].readableBytesView) }
      var data = Data(capacity: count)
      for buffer in buffers { data.append(contentsOf: buffer.readableBytesView) }
      return data
    }
  }
}
