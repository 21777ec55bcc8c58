import MediaCache
import NIOCore

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
  /// The strong entity tag and length of the version this read delivers, once seen (`noteSeen`).
  private var pinned: OriginTail.Pinned?
  /// The rest of the range from the origin, once another writer replaced the object mid-read.
  private var tail: OriginTail?

  init(owner: CachedBytes) {
    self.owner = owner
    let flight = owner.takeInitialFlight()
    self.flight = flight
    self.state = ReadCursorState(range: owner.range, attached: flight != nil)
  }

  /// The caller takes the last piece whole (`Iterator.nextOwnedPiece`): its buffer is not given back here, and
  /// its share of the read budget goes back now. The budget bounds reads that run ahead of their consumers; a
  /// piece handed over is its consumer's memory (the proxy's, bounded by what its responses may queue), and a
  /// consumer that stops (a paused player that reads nothing) must not keep it from other readers.
  func disownLastPiece() {
    lastBuffer = nil
    releaseLastPiece()
  }

  deinit {
    owner.session.environment.readBudget.release(heldBudget)
    if let lastBuffer { owner.session.environment.bufferPool.give(lastBuffer) }
    if let flight { flight.detach() }
  }

  private func leaveFlight(finishingChunk: Bool = false) async {
    if let flight { flight.detach(finishingChunk: finishingChunk) }
    flight = nil
    state.setAttached(false)
  }

  /// `range` from the cache, read on the I/O executor into a new buffer and checked there (the whole chunks
  /// holding it, or only their 16 KiB blocks that hold it once those chunks were verified whole:
  /// `FileHandleAssetDataManager.planVerifiedRead`), the buffer's readable bytes set to the range (no copy),
  /// after taking budget for the most the read may need. Bytes in a span (of an incomplete chunk) are read with
  /// the whole span and checked against its CRC, the same way.
  private func readFromCache(_ range: Range<Int64>, manager: FileHandleAssetDataManager, compact: Bool)
    async throws -> ByteBuffer
  {
    let budget = owner.session.environment.readBudget
    let pool = owner.session.environment.bufferPool
    let extent = manager.wholeChunkExtent(of: range)
    heldBudget = await budget.acquire(Int64(extent.count))
    do {
      let (buffer, read) = try await IOExecutor.shared.run { () throws -> (ByteBuffer, Int) in
        let plan = try manager.planVerifiedRead(range)
        let read = try pool.readVerified(plan, from: manager, minimumCapacity: extent.count)
        guard compact, read.readableBytes <= ByteBufferPool.smallLimit,
          read.capacity >= 2 * read.readableBytes
        else { return (read, plan.extent.count) }
        // The piece's own bytes, verified in `read`, in a buffer of their size; `read` goes back at once.
        var small = pool.take(capacity: read.readableBytes, minimumCapacity: read.readableBytes)
        small.writeImmutableBuffer(read)
        pool.give(read)
        return (small, plan.extent.count)
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

  /// Gives back the last piece's read budget and buffer.
  private func releaseLastPiece() {
    owner.session.environment.readBudget.release(heldBudget)
    heldBudget = 0
    if let buffer = lastBuffer {
      owner.session.environment.bufferPool.give(buffer)
      lastBuffer = nil
    }
  }

  /// The error that ends a read whose object moved to another version than the one it delivers.
  private func versionChanged(_ cause: String = "") -> OriginError {
    .objectChanged(url: owner.session.url, cause: cause)
  }

  /// Keeps the strong entity tag and length of the version this read delivers, from a manifest of it.
  private func noteSeen(_ manifest: Manifest) {
    guard pinned == nil, let seen = state.versionSeen, manifest.versionTag == seen else { return }
    pinned = OriginTail.Pinned(etag: manifest.etag, length: manifest.contentLength)
  }

  /// The object moved to another version than the one this read reports: once it delivered bytes, the rest of
  /// the range comes from the origin under that version's strong entity tag (`OriginTail`). Before its first
  /// byte, or without such a tag, the read ends with `change` (a proxy opens it again while its status has not
  /// gone out). Returns false when the range's bytes of that version were all delivered already (the new
  /// version is longer, and an open range went on to its length): the read is over.
  private func continueFromOrigin(_ change: OriginError) async throws -> Bool {
    await leaveFlight()
    guard let pinned, state.position > owner.range.lowerBound else { throw change }
    let end = min(owner.range.upperBound, pinned.length)
    guard state.position < end else { return false }
    tail = try await OriginTail.open(
      owner.session.url, state.position..<end, pinned: pinned, client: owner.session.environment.client)
    return true
  }

  /// The next piece of the range from the origin (`continueFromOrigin`); nil at its end.
  private func nextFromTail() async throws -> CachedPiece? {
    guard let buffer = try await tail!.next() else { return nil }
    state.delivered(buffer.readableBytes, versionTag: state.versionSeen ?? 0)  // seen: a tail needs it
    owner.noteDelivered(buffer.readableBytes, fromOrigin: true)
    return .origin([buffer])
  }

  /// The first `limit` bytes of `whole` (what is cached from the read's position), cut back to a verification
  /// block's boundary when that leaves some: a piece that ends on one lets the next start on one, and read only
  /// the blocks it hands over.
  static func piece(of whole: Range<Int64>, atMost limit: Int) -> Range<Int64> {
    var end = whole.lowerBound + Int64(min(whole.count, max(1, limit)))
    let block = Int64(FileHandleAssetDataManager.verificationBlockSize)
    if end < whole.upperBound, end / block * block > whole.lowerBound { end = end / block * block }
    return whole.lowerBound..<end
  }

  /// The next piece, of at most `limit` bytes (a chunk's worth at the most whatever the limit). A piece read
  /// from the cache under a limit smaller than what its read needed (the whole chunks, the first time they are
  /// verified) is copied into a buffer of its own size, so that a consumer holding it holds no more. A piece
  /// smaller than what is cached from its start ends on a verification block's boundary where it can, so that
  /// the next starts on one. `sizing` bounds each piece too, and counts a read from the cache while it runs.
  func next(atMost requested: Int = .max, sizing: (any PieceSizing)? = nil) async throws -> CachedPiece? {
    let session = owner.session
    let manager = session.manager
    releaseLastPiece()
    while true {
      try Task.checkCancellation()
      let limit = min(requested, sizing?.pieceLimit ?? .max)
      if tail != nil { return try await nextFromTail() }
      // Until a version is seen, the one the consumer was told of (a lock: not once a byte went out).
      if state.versionSeen == nil, let shown = owner.shownVersion { state.pin(shown) }
      let manifest = manager.manifest
      noteSeen(manifest)
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
      // Bytes the flight attached still holds, taken instead of a read of the cache.
      var held: (buffers: [ByteBuffer], version: UInt32?)?
      switch step {
      case .finished:
        // Bytes handed over while they were written (`FlightState.deliverWhileWriting`): their write is over
        // before the reader leaves, so the flight stays live for a reader asking for them meanwhile and the flush
        // after the last read commits them (unless it failed). Cancelled first: it leaves as one that gave up.
        let written = await flight?.waitUntilDeliveredBytesWritten() ?? true
        await leaveFlight(finishingChunk: written)
        return nil
      case .versionChanged:
        // A flight that failed and then reset the object (a lying length, a response it may not store) says
        // why better than the version change does.
        if let failure = flight?.failure as? OriginError { throw failure }
        guard try await continueFromOrigin(versionChanged()) else { return nil }
        continue
      case .readCache(let whole):
        let range = Self.piece(of: whole, atMost: limit)
        // The flight attached wrote these bytes a moment ago and holds them, or is about to (a miss's first
        // bytes are written before or as its reader first looks): from memory, without a hop to the I/O executor and
        // a read back. Only for a chunk not complete yet: a flight holds no other in memory.
        if let current = flight, !manifest.isPresent(Int(position / chunkSize)),
          let found = await current.held(from: position, limit: Int(range.count))
        {
          held = found
          break
        }
        let reservation = sizing?.reserveRead(wanted: range.count)
        defer { if let sizing, let reservation { sizing.release(reservation.reserved) } }
        let readRange = Self.piece(of: whole, atMost: min(limit, reservation?.atMost ?? .max))
        do {
          let buffer = try await readFromCache(
            readRange, manager: manager, compact: readRange.count < whole.count)
          if manager.manifest.versionTag != manifest.versionTag {
            releaseLastPiece()  // reset while it was read: look again
            continue
          }
          state.delivered(buffer.readableBytes, versionTag: manifest.versionTag)
          noteSeen(manifest)
          owner.noteDelivered(buffer.readableBytes, at: position)
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
        if let current = flight, !current.canServe(state.position) {
          await leaveFlight()
          continue
        }
      }
      guard let current = flight else { continue }
      let piece: Flight.Piece
      let bytesVersion: UInt32?
      do {
        if let held {
          (piece, bytesVersion) = (.memory(held.buffers), held.version)
        } else {
          (piece, bytesVersion) = try await current.next(
            from: state.position, limit: min(Int(chunkSize), max(1, limit)))
        }
      } catch let error as StoreError where error.code == .versionChanged {
        await leaveFlight()
        // A new version before any byte or metadata went out: read it. Else it is not this read's version.
        if state.versionSeen == nil { continue }
        guard try await continueFromOrigin(versionChanged("\(error)")) else { return nil }
        continue
      }
      switch piece {
      case .memory(let buffers):
        // A flight resets the object before it hands out a byte of another version (`BodyWriter.headChecked`).
        let now = manager.manifest
        if let seen = state.versionSeen, now.versionTag != seen {
          guard try await continueFromOrigin(versionChanged()) else { return nil }
          continue
        }
        if let bytesVersion, bytesVersion != now.versionTag {
          // Bytes the flight held of a version the object no longer is (it was reset since they were written):
          // let go of, so that nobody takes them or joins the flight for them, and the position looked at again.
          current.discardBytes(unlessOf: now.versionTag)
          await leaveFlight()
          continue
        }
        let piece = CachedPiece.origin(state.trimmed(buffers, contentLength: now.contentLength))
        // From the origin but for the bytes that were cached or received when the read opened.
        owner.noteDelivered(piece.count, at: state.position)
        state.delivered(piece.count, versionTag: now.versionTag)
        noteSeen(now)
        return piece
      case .disk:
        // The flight wrote these bytes; if the cache does not have them (dropped since, or their write failed
        // after they were handed over), fetch anew.
        state.flightWrotePosition(cached: manager.manifest.cachedRun(at: position) > 0)
      case .end:
        await leaveFlight()
        if state.flightEnded(contentLength: manager.contentLength) { return nil }
      }
    }
  }
}
