import Foundation

/// A chunk, or the span of an incomplete chunk, read from the data file into a pooled buffer and not yet
/// checked against its CRC: what `VerifiedChunkReader` reads before it checks. The read blocks and the check
/// does not, so the two may run on different threads: a streamed read (`ChunkReadSequence`) checks one piece
/// where its consumer runs while the next is read on the I/O executor. No byte of it is given out before it
/// passes (`VerifiedChunkReader.settle(_:)`, or `check()` then `accept(_:)` or `reject(_:_:)`).
struct UnverifiedBytes: Sendable {
  /// Where the bytes came from, and what a failure drops.
  enum Source: Sendable {
    /// Present chunk `index` of the manifest version `version`; `kept` names it in `VerifiedChunkCache` once
    /// it passes (an object's first and last chunks only).
    case chunk(index: Int, version: UInt32, kept: VerifiedChunkCache.Key?)
    /// The span of an incomplete chunk.
    case span(Manifest.Span)
    /// An edge chunk found in `VerifiedChunkCache`: checked when it was kept.
    case checked
  }

  /// The bytes as read (fewer than `range.count` when the data file was short).
  let data: Data
  /// The chunk's or span's bytes in the object.
  let range: Range<Int64>
  /// The CRC-32 the manifest lists for them.
  let expected: UInt32
  let source: Source
  /// The bytes of the object wanted from them (inside `range`): all of them unless a piece says otherwise.
  var piece: Range<Int64>

  init(data: Data, range: Range<Int64>, expected: UInt32, source: Source) {
    (self.data, self.range, self.expected, self.source, self.piece) = (data, range, expected, source, range)
  }

  /// The check of the bytes against their CRC (`ChunkCheck`), nil for bytes checked when they were kept. CPU
  /// only: callable anywhere.
  func check() -> ChunkCheck? {
    if case .checked = source { return nil }
    return data.withUnsafeBytes { ChunkCheck(range, expected: expected, checking: $0) }
  }

  /// The bytes of `piece` (no copy when it is all of them).
  fileprivate var pieceBytes: Data {
    let low = Int(piece.lowerBound - range.lowerBound)
    let high = Int(piece.upperBound - range.lowerBound)
    return low == 0 && high == data.count ? data : data.subdata(in: low..<high)
  }
}

extension VerifiedChunkReader {
  /// Chunk `index` read whole into a pooled buffer, not checked yet; an edge chunk kept in `VerifiedChunkCache`
  /// is taken from there instead. Throws `StoreError.notCached` when the chunk is not present.
  func unverifiedChunk(_ index: Int) throws -> UnverifiedBytes {
    let plan = try view.withLock {
      view -> (range: Range<Int64>, expected: UInt32, version: UInt32, edge: Bool) in
      try self.view.ensureOpen(view)
      guard let expected = view.manifest.crc(ofChunk: index) else {
        throw StoreError.notCached(objectID, missing: [view.manifest.byteRange(ofChunk: index)])
      }
      self.view.readsInFlight.add(1, ordering: .acquiring)
      let isEdge = index == 0 || view.manifest.chunkCount.map { index == $0 - 1 } ?? false
      return (view.manifest.byteRange(ofChunk: index), expected, view.manifest.versionTag, isEdge)
    }
    defer { view.readsInFlight.subtract(1, ordering: .releasing) }
    // Only an object's first and last chunks are ever kept: no look-up (and no lock) for the others.
    let kept =
      plan.edge
      ? VerifiedChunkCache.Key(
        file: try file.identity, version: plan.version, chunk: index, crc: plan.expected)
      : nil
    if let kept, let recent = VerifiedChunkCache.shared.data(for: kept), recent.count == plan.range.count {
      return UnverifiedBytes(data: recent, range: plan.range, expected: plan.expected, source: .checked)
    }
    let data = try ReadBufferPool.shared.data(count: Int(plan.range.count)) { buffer in
      try mapIO { try file.handle.read(into: buffer, at: plan.range.lowerBound) }
    }
    return UnverifiedBytes(
      data: data, range: plan.range, expected: plan.expected,
      source: .chunk(index: index, version: plan.version, kept: kept))
  }

  /// `span` read whole into a pooled buffer, not checked yet.
  func unverifiedSpan(_ span: Manifest.Span) throws -> UnverifiedBytes {
    let chunkSize = try view.withLock { view in
      try self.view.ensureOpen(view)
      self.view.readsInFlight.add(1, ordering: .acquiring)
      return view.manifest.chunkSize
    }
    defer { view.readsInFlight.subtract(1, ordering: .releasing) }
    let data = try ReadBufferPool.shared.data(count: Int(span.range.count), capacity: chunkSize) { buffer in
      try mapIO { try file.handle.read(into: buffer, at: span.range.lowerBound) }
    }
    return UnverifiedBytes(data: data, range: span.range, expected: span.crc, source: .span(span))
  }

  /// The bytes of `bytes`' piece once they pass their CRC; else the chunk (or span) is dropped from the
  /// manifest (fetched again later) and `StoreError.corruptChunk` thrown. Blocking on a failure.
  func settle(_ bytes: UnverifiedBytes) throws -> Data {
    let check = bytes.check()
    if let check, !check.passed { try reject(bytes, check) }
    return accept(bytes)
  }

  /// The bytes of `bytes`' piece, which passed their check (`UnverifiedBytes.check()`); an edge chunk is kept
  /// in `VerifiedChunkCache`. Not blocking.
  func accept(_ bytes: UnverifiedBytes) -> Data {
    if case .chunk(_, _, let kept?) = bytes.source { VerifiedChunkCache.shared.insert(bytes.data, for: kept) }
    return bytes.pieceBytes
  }

  /// Bytes that failed `check`: counted, their chunk (or span) dropped from the manifest (fetched again later),
  /// and `StoreError.corruptChunk` thrown. Blocking (the manifest is written).
  func reject(_ bytes: UnverifiedBytes, _ check: ChunkCheck) throws -> Never {
    switch bytes.source {
    case .span(let span):
      throw spanFailed(span, actual: check.actual)
    case .chunk(let index, let version, _):
      CacheMetrics.noteCRCFailures(1, during: .read)
      try writer.dropChunk(index, expected: bytes.expected, version: version, range: bytes.range)
      throw StoreError.corruptChunk(objectID, chunk: index, expected: bytes.expected, actual: check.actual)
    case .checked:
      preconditionFailure("bytes checked when they were kept cannot fail")
    }
  }
}
