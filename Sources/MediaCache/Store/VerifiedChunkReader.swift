import Foundation

/// The reading half of an open object: any range of its present chunks, every chunk read whole and checked
/// against its CRC (`ChunkCheck`) before a byte of it is returned. It plans under the `ObjectView`'s lock and
/// reads without it, so any number of threads read one object at once and none waits for a writer's disk.
///
/// A chunk that fails is dropped (`ObjectWriter.dropChunk`) and `StoreError.corruptChunk` thrown, so it is
/// fetched again. An object's first and last chunks are offered to `VerifiedChunkCache`, where players look
/// for the index again and again; others are not (keeping chunks read at random or streamed in order would
/// only push those out, take their buffers from `ReadBufferPool`, and delay finding damage on disk in the
/// chunks a scrub or a reader would otherwise check).
struct VerifiedChunkReader: Sendable {
  let objectID: ObjectID
  let store: ShardedStore
  /// The data file, which also names the object's chunks in `VerifiedChunkCache` (by its inode, whatever store
  /// it is in).
  let file: ObjectDataFile
  let view: ObjectView
  let writer: ObjectWriter

  /// See `FileHandleAssetDataManager.read(_:)`.
  func read(_ range: Range<Int64>) throws -> Data {
    guard !range.isEmpty else {
      _ = try checkCached(range)
      noteAccess()
      return Data()
    }
    // The chunk size only decides the path here; each path checks the range (`checkCached`) once.
    let chunkSize = Int64(view.withLock { $0.manifest.chunkSize })
    let first = Int(range.lowerBound / chunkSize)
    let last = Int((range.upperBound - 1) / chunkSize)
    guard touchesEdge(first...last) else {
      // Only the 16 KiB blocks holding the range, of chunks verified whole since they were written (the first
      // read of a chunk reads and checks it whole, keeping its blocks' CRCs: `BlockCRCTable`), as a server's
      // read does.
      let plan = try planVerifiedRead(range, readingManifest: true)
      var data = Data(count: plan.extent.count)
      try data.withUnsafeMutableBytes { try readVerified(plan, into: $0) }
      return plan.extent == range ? data : data.subdata(in: plan.offset..<plan.offset + Int(range.count))
    }
    // An object's first or last chunk, which players read again and again: through `VerifiedChunkCache`.
    _ = try checkCached(range)
    noteAccess()
    if first == last, range.lowerBound == Int64(first) * chunkSize, spanHolding(range.lowerBound) == nil {
      // One chunk from its start (the common piece of a streamed read): no copy when it is the whole chunk.
      let data = try settle(try unverifiedChunk(first))
      return data.count == range.count ? data : data.prefix(Int(range.count))
    }
    var out = Data()
    out.reserveCapacity(Int(range.count))
    for index in first...last {
      let chunkStart = Int64(index) * chunkSize
      if let span = spanHolding(max(range.lowerBound, chunkStart)) {
        // Bytes of a chunk that is not complete: its span, read whole and checked.
        let data = try settle(try unverifiedSpan(span))
        let low = Int(max(range.lowerBound, chunkStart) - span.range.lowerBound)
        let high = Int(min(range.upperBound, span.range.upperBound) - span.range.lowerBound)
        out.append(data[data.startIndex + low..<data.startIndex + high])
        continue
      }
      let data = try settle(try unverifiedChunk(index))
      let low = Int(max(range.lowerBound, chunkStart) - chunkStart)
      let high = Int(min(range.upperBound, chunkStart + Int64(data.count)) - chunkStart)
      out.append(data[data.startIndex + low..<data.startIndex + high])
    }
    return out
  }

  /// One piece of a streamed read (`ChunkReadSequence`), read and not yet checked: the chunk (or the span of an
  /// incomplete chunk) holding `offset`, with the part of it from `offset` up to `end` (and the chunk's end)
  /// as its piece. Blocking, as a read is; the check that follows is not (`UnverifiedBytes`).
  func unverifiedPiece(startingAt offset: Int64, end: Int64) throws -> UnverifiedBytes {
    let chunkSize = Int64(view.withLock { $0.manifest.chunkSize })
    let pieceEnd = min(end, (offset / chunkSize + 1) * chunkSize)
    _ = try checkCached(offset..<pieceEnd)
    noteAccess()
    var bytes: UnverifiedBytes
    if let span = spanHolding(offset) {
      bytes = try unverifiedSpan(span)
    } else {
      bytes = try unverifiedChunk(Int(offset / chunkSize))
    }
    bytes.piece = offset..<min(pieceEnd, bytes.range.upperBound)
    return bytes
  }

  /// Whether `chunks` holds the object's first chunk or its last (when its length is known).
  private func touchesEdge(_ chunks: ClosedRange<Int>) -> Bool {
    chunks.lowerBound == 0
      || view.withLock { view in view.manifest.chunkCount.map { chunks.upperBound >= $0 - 1 } ?? false }
  }

  /// The bytes of the whole chunks that hold `range` (not empty): the most `readVerified(_:into:)` reads.
  func wholeChunkExtent(of range: Range<Int64>) -> Range<Int64> {
    view.withLock { view in
      let (first, last) = Self.chunks(holding: range, chunkSize: view.manifest.chunkSize)
      return view.manifest.byteRange(ofChunk: first)
        .lowerBound..<view.manifest.byteRange(ofChunk: last).upperBound
    }
  }

  /// The first and last chunk holding bytes of `range` (not empty).
  private static func chunks(holding range: Range<Int64>, chunkSize: Int) -> (first: Int, last: Int) {
    let first = Int(range.lowerBound / Int64(chunkSize))
    return (first, max(first, Int((range.upperBound - 1) / Int64(chunkSize))))
  }

  /// See `FileHandleAssetDataManager.planVerifiedRead(_:readingManifest:)`.
  func planVerifiedRead(_ range: Range<Int64>, readingManifest: Bool) throws -> VerifiedReadPlan {
    _ = try checkCached(range, readingManifest: readingManifest)
    // Before the view's lock, which is never held across a system call: a new object's data file not made yet
    // (`deferringCreation`) is made here, as the read needs it; not without `readingManifest` (an event loop's
    // read, which must not block): that read is declined as not cached now.
    guard let identity = readingManifest ? try file.identity : file.ifMade?.identity else {
      throw StoreError.notCached(objectID, missing: [range])
    }
    return try view.withLock { view in
      try self.view.ensureOpen(view)
      let chunkSize = view.manifest.chunkSize
      let (first, last) = Self.chunks(holding: range, chunkSize: chunkSize)
      let byBlocks = BlockCRCTable.usesBlocks(chunkSize: chunkSize)
      let block = Int64(BlockCRCTable.blockSize)
      var segments: [VerifiedReadPlan.Segment] = []
      for index in first...last {
        let chunk = view.manifest.byteRange(ofChunk: index)
        guard let crc = view.manifest.crc(ofChunk: index) else {
          // Bytes of a chunk that is not complete: the span holding them, read whole and checked.
          let part = chunk.clamped(to: range)
          guard let span = view.manifest.span(containing: part.lowerBound),
            span.range.upperBound >= part.upperBound
          else { throw StoreError.notCached(objectID, missing: [part]) }
          segments.append(
            VerifiedReadPlan.Segment(
              chunk: index, chunkBytes: span.range, bytes: span.range, crc: span.crc, blocks: nil, span: span)
          )
          continue
        }
        let key = VerifiedChunkCache.Key(
          file: identity, version: view.manifest.versionTag, chunk: index, crc: crc)
        var segment = VerifiedReadPlan.Segment(
          chunk: index, chunkBytes: chunk, bytes: chunk, crc: crc, blocks: nil)
        if byBlocks, let blocks = BlockCRCTable.shared.crcs(for: key) {
          // Only the blocks that hold bytes of the range.
          let part = chunk.clamped(to: range)
          let low = chunk.lowerBound + (part.lowerBound - chunk.lowerBound) / block * block
          let high = min(
            chunk.upperBound,
            chunk.lowerBound + (part.upperBound - chunk.lowerBound + block - 1) / block * block)
          segment.bytes = low..<high
          segment.blocks = blocks
        }
        segments.append(segment)
      }
      return VerifiedReadPlan(
        range: range, extent: segments.first!.bytes.lowerBound..<segments.last!.bytes.upperBound,
        segments: segments, version: view.manifest.versionTag, chunkSize: chunkSize)
    }
  }

  /// See `FileHandleAssetDataManager.readVerified(_:into:)`.
  func readVerified(_ plan: VerifiedReadPlan, into buffer: UnsafeMutableRawBufferPointer) throws {
    try beginRead()
    noteAccess()
    let failed: (segment: VerifiedReadPlan.Segment, actual: UInt32)?
    do {
      defer { view.readsInFlight.subtract(1, ordering: .releasing) }
      failed = try check(plan, into: buffer) { target, offset in
        try mapIO { try file.handle.read(into: target, at: offset) }
      }
    }
    if let (segment, actual) = failed, let span = segment.span { throw spanFailed(span, actual: actual) }
    if let (segment, actual) = failed {
      BlockCRCTable.shared.remove(
        VerifiedChunkCache.Key(
          file: try file.identity, version: plan.version, chunk: segment.chunk, crc: segment.crc))
      CacheMetrics.noteCRCFailures(1, during: .read)
      try writer.dropChunk(
        segment.chunk, expected: segment.crc, version: plan.version, range: segment.chunkBytes)
      throw StoreError.corruptChunk(objectID, chunk: segment.chunk, expected: segment.crc, actual: actual)
    }
  }

  /// See `FileHandleAssetDataManager.readVerifiedIfResident(_:into:)`.
  func readVerifiedIfResident(_ plan: VerifiedReadPlan, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard (try? beginRead()) != nil else { return false }
    defer { view.readsInFlight.subtract(1, ordering: .releasing) }
    struct NotResident: Error {}
    do {
      let failed = try check(plan, into: buffer) { target, offset in
        // (Never makes a file whose creation is due: this may run where nothing may block.)
        guard let handle = file.ifMade?.file, handle.readIfResident(into: target, at: offset) else {
          throw NotResident()
        }
        return target.count
      }
      // A chunk that fails its check: left for `readVerified`, which drops it.
      if failed != nil { return false }
    } catch {
      return false
    }
    noteAccess(touchingLater: true)
    return true
  }

  /// Counts a read in flight (the handle closes only once none is), unless the handle is closed.
  private func beginRead() throws {
    try view.withLock { view in
      try self.view.ensureOpen(view)
      self.view.readsInFlight.add(1, ordering: .acquiring)
    }
  }

  /// Reads each segment of `plan` into its place in `buffer` with `read` (which returns the bytes it read) and
  /// checks it against its CRC (by blocks where the plan has them; a chunk read whole gives its block CRCs to
  /// `BlockCRCTable` on a pass). Returns the first segment that failed, with the CRC found, or nil.
  private func check(
    _ plan: VerifiedReadPlan, into buffer: UnsafeMutableRawBufferPointer,
    read: (UnsafeMutableRawBufferPointer, Int64) throws -> Int
  ) throws -> (segment: VerifiedReadPlan.Segment, actual: UInt32)? {
    precondition(buffer.count >= plan.extent.count, "the buffer is smaller than the plan's extent")
    for segment in plan.segments {
      let offset = Int(segment.bytes.lowerBound - plan.extent.lowerBound)
      let target = UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<offset + segment.bytes.count])
      let count = try read(target, segment.bytes.lowerBound)
      let bytes = UnsafeRawBufferPointer(rebasing: target[..<count])
      if let blocks = segment.blocks {
        guard count == segment.bytes.count,
          ChunkCheck.blocksMatch(
            bytes, range: segment.bytes, chunkStart: segment.chunkBytes.lowerBound, blocks: blocks,
            blockSize: BlockCRCTable.blockSize)
        else { return (segment, 0) }
      } else if segment.span == nil, BlockCRCTable.usesBlocks(chunkSize: plan.chunkSize) {
        // The whole chunk, checked by its blocks combined: their CRCs are kept for later reads.
        let (check, blocks) = ChunkCheck.blocks(
          of: bytes, range: segment.chunkBytes, expected: segment.crc, blockSize: BlockCRCTable.blockSize)
        guard check.passed, let blocks else { return (segment, check.actual) }
        BlockCRCTable.shared.insert(
          blocks,
          for: VerifiedChunkCache.Key(
            file: try file.identity, version: plan.version, chunk: segment.chunk, crc: segment.crc))
      } else {
        let actual = CRC32.checksum(bytes)
        guard count == segment.chunkBytes.count, actual == segment.crc else { return (segment, actual) }
      }
    }
    return nil
  }

  /// Throws unless every byte of `range` is in a present chunk (re-reading the manifest on disk first, without
  /// the view's lock, when the view lacks some and `readingManifest`: another writer may have committed them).
  /// Returns the chunk size.
  private func checkCached(_ range: Range<Int64>, readingManifest: Bool = true) throws -> Int64 {
    let known = try view.withLock { view -> Int64? in
      try self.view.ensureOpen(view)
      guard range.lowerBound >= 0, view.manifest.contentLength.map({ range.upperBound <= $0 }) ?? true else {
        throw StoreError.outOfBounds(objectID, range: range, length: view.manifest.contentLength)
      }
      // Per chunk, not through the byte-range set: this runs for every piece of a streamed read.
      let present = view.manifest.chunks(covering: range).allSatisfy { index in
        if view.manifest.isPresent(index) { return true }
        let part = view.manifest.byteRange(ofChunk: index).clamped(to: range)
        return view.manifest.span(containing: part.lowerBound).map { $0.range.upperBound >= part.upperBound }
          ?? false
      }
      return present ? Int64(view.manifest.chunkSize) : nil
    }
    if let known { return known }
    guard readingManifest else { throw StoreError.notCached(objectID, missing: [range]) }
    try view.refresh(from: store)
    return try view.withLock { view in
      try self.view.ensureOpen(view)
      let missing = view.manifest.missingByteRanges(in: range)
      if !missing.isEmpty { throw StoreError.notCached(objectID, missing: missing) }
      return Int64(view.manifest.chunkSize)
    }
  }

  /// Stamps the object's recency (`ShardedStore.noteAccess`) once it has a manifest on disk: the open of a new
  /// object, or a read of its bytes before its first commit, has none to stamp (the commit makes it, with a new
  /// time). The open and every read stamp through here.
  func noteAccess(touchingLater: Bool = false) {
    guard view.manifestOnDisk.load(ordering: .relaxed) else { return }
    store.noteAccess(objectID, touchingLater: touchingLater)
  }

  /// The span holding byte `offset` when its chunk is not present.
  private func spanHolding(_ offset: Int64) -> Manifest.Span? {
    view.withLock { view in
      view.manifest.isPresent(Int(offset / Int64(view.manifest.chunkSize)))
        ? nil : view.manifest.span(containing: offset)
    }
  }

  /// A span whose bytes failed its CRC: counted, dropped (fetched again later), and the error to throw.
  func spanFailed(_ span: Manifest.Span, actual: UInt32) -> StoreError {
    CacheMetrics.noteCRCFailures(1, during: .read)
    writer.dropSpan(span)
    let chunkSize = Int64(view.withLock { $0.manifest.chunkSize })
    return StoreError.corruptChunk(
      objectID, chunk: Int(span.range.lowerBound / chunkSize), expected: span.crc, actual: actual)
  }
}
