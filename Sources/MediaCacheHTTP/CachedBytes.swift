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
  /// The manifest when the read was opened: bytes of a chunk it did not list count as fetched from the origin
  /// for this read, even when a flight wrote them to the cache before this reader got to them. (A copy of the
  /// value, which shares the manifest's storage: nothing is built per read.)
  let manifestAtOpen: Manifest
  /// Who waits for this read's bytes: the flights it starts or joins are scheduled accordingly.
  let priority: ReadPriority

  init(
    session: ObjectSession, range: Range<Int64>, initialFlight: Flight?, lengthHint: Int64? = nil,
    manifestAtOpen: Manifest, priority: ReadPriority = .foreground
  ) {
    self.priority = priority
    self.session = session
    self.range = range
    self.initialFlight = Mutex(initialFlight)
    self.lengthHint = lengthHint
    self.manifestAtOpen = manifestAtOpen
  }

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
    if let flight = takeInitialFlight() { Task { await flight.detach() } }
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
  public var length: Int64? { session.manager.contentLength ?? lengthHint }
  /// The bytes this read will deliver, once the length is known.
  public var count: Int64? {
    guard range.upperBound != .max else { return length.map { Swift.max(0, $0 - range.lowerBound) } }
    return Int64(range.count)
  }
  /// What the cache recorded from the origin.
  public var contentType: String? { session.manager.manifest.contentType }
  /// The origin's entity tag, as the cache recorded it (quotes and any `W/` included).
  public var etag: String? { session.manager.manifest.etag }
  /// The origin's `Last-Modified` header value, as the cache recorded it.
  public var lastModified: String? { session.manager.manifest.lastModified }

  /// Bytes of the range cached now.
  var cachedBytes: Int64 { cachedBytes(in: session.manager.manifest) }

  /// Bytes of the range that were cached when the read opened (before its first flight wrote anything).
  var cachedBytesAtOpen: Int64 { cachedBytes(in: manifestAtOpen) }

  /// The bytes of the range cached since the read opened (by its flights, or any other writer of the object).
  var rangesCachedSinceOpen: [Range<Int64>] {
    let end = range.upperBound == .max ? (length ?? range.lowerBound) : range.upperBound
    guard end > range.lowerBound else { return [] }
    let now = session.manager.manifest.presentByteRanges.intersection(range.lowerBound..<end)
    return now.subtracting(manifestAtOpen.presentByteRanges).ranges
  }

  /// The cached object's id.
  package var objectID: ObjectID { session.manager.objectID }

  private func cachedBytes(in manifest: Manifest) -> Int64 {
    let end = range.upperBound == .max ? (length ?? range.lowerBound) : range.upperBound
    guard end > range.lowerBound else { return 0 }
    return manifest.presentByteRanges.intersection(range.lowerBound..<end).count
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
        await flight.detach()
        throw error
      }
      await flight.detach()
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
    /// `nextPiece()` for a consumer that gives a piece's buffer back itself (`CachingReader.recycle(_:)`) once
    /// it is done with it: the proxy, once NIO has written it to the socket. (`nextPiece()` takes it back at
    /// the next call, when a writer may still hold it, and a pool's next write into it would copy it first.)
    package mutating func nextOwnedPiece() async throws -> CachedPiece? {
      let piece = try await cursor.next()
      cursor.disownLastBuffer()
      return piece
    }
  }
}

/// One piece of a read: at most a chunk's worth of bytes.
public enum CachedPiece: Sendable {
  /// Bytes read from the cache's files, CRC-verified in this very buffer (the whole chunks holding them were
  /// read into it and checked there; the buffer's readable bytes are the piece).
  case disk(ByteBuffer)
  /// Bytes straight from an origin response (already written to the cache), as slices of its buffers.
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

/// One reader of a `CachedBytes` range: its `ReadCursorState` (where the next bytes come from) and the flight
/// it is attached to.
final class ReadCursor: @unchecked Sendable {
  // Mutated only by the task iterating the sequence (an iterator is not shared between tasks).
  private let owner: CachedBytes
  private var state: ReadCursorState
  private var flight: Flight?
  /// Budget the last piece read from the cache holds (`ReadBudget`), given back when the next is asked for.
  private var heldBudget: Int64 = 0
  /// The buffer of the last piece read from the cache, given back to the pool when the next is asked for.
  private var lastBuffer: ByteBuffer?

  init(owner: CachedBytes) {
    self.owner = owner
    let flight = owner.takeInitialFlight()
    self.flight = flight
    self.state = ReadCursorState(range: owner.range, attached: flight != nil)
  }

  /// The caller takes the last piece's buffer (`Iterator.nextOwnedPiece`): it is not given back here.
  func disownLastBuffer() { lastBuffer = nil }

  deinit {
    owner.session.environment.readBudget.release(heldBudget)
    if let lastBuffer { owner.session.environment.bufferPool.give(lastBuffer) }
    if let flight { Task { await flight.detach() } }
  }

  private func leaveFlight(finishingChunk: Bool = false) async {
    if let flight { await flight.detach(finishingChunk: finishingChunk) }
    flight = nil
    state.setAttached(false)
  }

  /// `range` from the cache, read on the I/O executor into a new buffer and checked there (the whole chunks
  /// holding it, or only their 16 KiB blocks that hold it once those chunks were verified whole:
  /// `FileHandleAssetDataManager.planVerifiedRead`), the buffer's readable bytes set to the range (no copy),
  /// after taking budget for the most the read may need. Bytes in a span (an incomplete chunk) are read by
  /// `read(_:)` and copied.
  private func readFromCache(_ range: Range<Int64>, manager: FileHandleAssetDataManager) async throws
    -> ByteBuffer
  {
    let budget = owner.session.environment.readBudget
    let pool = owner.session.environment.bufferPool
    let extent = manager.wholeChunkExtent(of: range)
    heldBudget = await budget.acquire(Int64(extent.count))
    do {
      let (buffer, read) = try await IOExecutor.shared.run { () throws -> (ByteBuffer, Int) in
        do {
          let plan = try manager.planVerifiedRead(range)
          return (
            try pool.readVerified(plan, from: manager, minimumCapacity: extent.count), plan.extent.count
          )
        } catch let error as StoreError where error.code == .notCached {
          return (ByteBuffer(bytes: try manager.read(range)), range.count)
        }
      }
      lastBuffer = buffer
      // What the read did not need of the budget goes back at once (blocks instead of whole chunks).
      let used = Int64(min(read, extent.count))
      if used < heldBudget {
        budget.release(heldBudget - used)
        heldBudget = used
      }
      return buffer
    } catch {
      budget.release(heldBudget)
      heldBudget = 0
      throw error
    }
  }

  func next() async throws -> CachedPiece? {
    let session = owner.session
    let manager = session.manager
    session.environment.readBudget.release(heldBudget)
    heldBudget = 0
    if let buffer = lastBuffer {
      session.environment.bufferPool.give(buffer)
      lastBuffer = nil
    }
    while true {
      try Task.checkCancellation()
      let manifest = manager.manifest
      let chunkSize = Int64(manifest.chunkSize)
      let position = state.position
      // What is cached from here, into the next chunk when it is present: a piece from the cache is a chunk's
      // worth of bytes wherever it starts (one read of the two chunks it touches, one hop to the executor).
      var run = manifest.cachedRun(at: position)
      if run > 0, run < chunkSize, manifest.isPresent(Int((position + run) / chunkSize)) {
        run += min(chunkSize - run, manifest.cachedRun(at: position + run))
      }
      let step = state.next(
        ReadCursorState.Object(
          contentLength: manifest.contentLength, versionTag: manifest.versionTag, cachedRun: run))
      switch step {
      case .finished:
        await leaveFlight(finishingChunk: true)
        return nil
      case .versionChanged:
        throw OriginError.inconsistentResponse(
          url: session.url, reason: "the origin's object changed while it was being read")
      case .readCache(let range):
        do {
          let buffer = try await readFromCache(range, manager: manager)
          state.delivered(buffer.readableBytes, versionTag: manager.manifest.versionTag)
          owner.noteDelivered(
            buffer.readableBytes, fromOrigin: owner.manifestAtOpen.cachedRun(at: position) == 0)
          return .disk(buffer)
        } catch let error as StoreError where error.code == .corruptChunk || error.code == .notCached {
          continue  // dropped or gone: fetch it again
        }
      case .findFlight:
        await leaveFlight()
        flight = await session.flight(
          for: state.position, upTo: owner.range.upperBound == .max ? nil : owner.range.upperBound,
          priority: owner.priority)
        state.setAttached(flight != nil)
        if flight == nil { continue }  // completed meanwhile: read it from the cache
      case .checkFlight:
        if let current = flight, !(await current.canServe(state.position)) {
          await leaveFlight()
          continue
        }
      }
      guard let current = flight else { continue }
      let piece: Flight.Piece
      do {
        piece = try await current.next(from: state.position, limit: Int(chunkSize))
      } catch let error as StoreError where error.code == .versionChanged && state.versionSeen == nil {
        // The object moved to a new version before this reader delivered anything: read the new one.
        await leaveFlight()
        continue
      }
      switch piece {
      case .memory(let buffers):
        let piece = CachedPiece.origin(state.trimmed(buffers, contentLength: manager.contentLength))
        state.delivered(piece.count, versionTag: manager.manifest.versionTag)
        owner.noteDelivered(piece.count, fromOrigin: true)
        return piece
      case .disk:
        // The flight wrote these bytes; if the cache does not have them (dropped since), fetch anew.
        state.flightWrotePosition(cached: manager.manifest.cachedRun(at: position) > 0)
      case .end:
        await leaveFlight()
        if state.flightEnded(contentLength: manager.contentLength) { return nil }
      }
    }
  }
}
