import Foundation
import Synchronization

/// The writing half of an open object: bytes to the data file with `pwrite`, the parts of chunks not yet
/// complete (`PartialChunk`), a chunk made present once all its bytes are on disk and its CRC is known, and
/// the object's metadata. Its lock is held across `pwrite`, `fsync` and manifest commits; what readers need is
/// published to the `ObjectView`, whose lock is never held across a system call. Committing is in
/// `ObjectWriter+Commit.swift`.
final class ObjectWriter: Sendable {
  struct State {
    /// Chunks written in part, by index.
    var partial: [Int: PartialChunk] = [:]
    /// Bytes of chunks completed since the last commit was handed over.
    var uncommittedBytes: Int64 = 0
    var lastCommit = Date().timeIntervalSince1970
    /// Commits made by the calling threads (a background result older than one of them is not adopted).
    var foregroundCommits = 0
    /// What the last background commit threw, until a caller is told.
    var backgroundError: (any Error)?
  }

  let objectID: ObjectID
  let isWritable: Bool
  let store: ShardedStore
  let file: ObjectDataFile
  let view: ObjectView
  let scheduler: CommitScheduler
  let observer: FileHandleAssetDataManager.Observer
  let state = Mutex(State())

  init(
    objectID: ObjectID, isWritable: Bool, store: ShardedStore, file: ObjectDataFile, view: ObjectView,
    scheduler: CommitScheduler, observer: FileHandleAssetDataManager.Observer
  ) {
    self.objectID = objectID
    self.isWritable = isWritable
    self.store = store
    self.file = file
    self.view = view
    self.scheduler = scheduler
    self.observer = observer
  }

  // MARK: Bytes

  /// See `FileHandleAssetDataManager.write(_:at:ifVersion:)`.
  func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, ifVersion versionTag: UInt32?) throws {
    let mustWait = try state.withLock { state -> Bool in
      try ensureWritable()
      try reportBackgroundError(&state)
      let end = offset + Int64(bytes.count)
      // The pieces to write: chunks already present are not rewritten (they were verified).
      let (chunkSize, pieces) = try view.withLock { view -> (Int64, [Range<Int64>]) in
        try checkVersion(versionTag, of: view.manifest)
        guard offset >= 0, end <= Manifest.maxLength(chunkSize: view.manifest.chunkSize),
          view.manifest.contentLength.map({ end <= $0 }) ?? true
        else {
          throw StoreError.outOfBounds(
            objectID, range: offset..<max(offset, end), length: view.manifest.contentLength)
        }
        let chunkSize = Int64(view.manifest.chunkSize)
        var pieces: [Range<Int64>] = []
        var cursor = offset
        while cursor < end {
          let pieceEnd = min(end, (cursor / chunkSize + 1) * chunkSize)
          if !view.manifest.isPresent(Int(cursor / chunkSize)) { pieces.append(cursor..<pieceEnd) }
          cursor = pieceEnd
        }
        return (chunkSize, pieces)
      }
      for piece in pieces {
        let index = Int(piece.lowerBound / chunkSize)
        let chunkStart = Int64(index) * chunkSize
        let slice = UnsafeRawBufferPointer(
          rebasing: bytes[Int(piece.lowerBound - offset)..<Int(piece.upperBound - offset)])
        try mapIO { try file.handle.write(slice, at: piece.lowerBound) }
        if state.partial[index] == nil { state.partial[index] = seededPartial(index, chunkStart: chunkStart) }
        state.partial[index]!.add(
          (piece.lowerBound - chunkStart)..<(piece.upperBound - chunkStart), crc: CRC32.checksum(slice))
        try completeIfCovered(index, &state)
        if let partial = state.partial[index] { publishSpans(index, partial, chunkStart: chunkStart) }
      }
      return try commitIfDue(&state)
    }
    if mustWait {
      // Too far ahead of the disk: wait for the batch in flight, then hand over the backlog.
      scheduler.waitForBackground()
      try state.withLock { state in
        try view.withLock { try view.ensureOpen($0) }
        try reportBackgroundError(&state)
        _ = try commitIfDue(&state)
      }
    }
  }

  /// See `FileHandleAssetDataManager.prepareForWriting(chunk:)`.
  func prepareForWriting(chunk index: Int) {
    guard isWritable else { return }
    // Counted as a read in flight, so the handle is not closed under the call.
    let range = try? view.withLock { view -> Range<Int64>? in
      try self.view.ensureOpen(view)
      let manifest = view.manifest
      guard index >= 0, !manifest.isPresent(index), manifest.spans[index] == nil else { return nil }
      let chunkSize = Int64(manifest.chunkSize)
      let start = Int64(index) * chunkSize
      let end = min(start + chunkSize, manifest.contentLength ?? (start + chunkSize))
      guard start < end else { return nil }
      self.view.readsInFlight.add(1, ordering: .acquiring)
      return start..<end
    }
    guard let range = range ?? nil else { return }
    defer { view.readsInFlight.subtract(1, ordering: .releasing) }
    (try? file.handle)?.warmPageCache(range)
  }

  /// See `FileHandleAssetDataManager.setContentLength(_:ifVersion:)`.
  func setContentLength(_ length: Int64, ifVersion versionTag: UInt32?) throws {
    try state.withLock { state in
      try ensureWritable()
      let chunkSize = try view.withLock { view -> Int64? in
        try checkVersion(versionTag, of: view.manifest)
        if let known = view.manifest.contentLength {
          guard known == length else {
            throw StoreError.lengthConflict(objectID, recorded: known, declared: length)
          }
          return nil
        }
        guard length >= 0, length <= Manifest.maxLength(chunkSize: view.manifest.chunkSize) else {
          throw StoreError.outOfBounds(objectID, range: 0..<max(0, length), length: nil)
        }
        let chunkSize = Int64(view.manifest.chunkSize)
        // While the length was unknown every present chunk is a full chunk: none may reach past the length.
        if let beyond = view.manifest.presentChunks.ranges.last, Int64(beyond.upperBound) * chunkSize > length
        {
          throw StoreError.outOfBounds(
            objectID, range: Int64(beyond.lowerBound) * chunkSize..<Int64(beyond.upperBound) * chunkSize,
            length: length)
        }
        return chunkSize
      }
      guard let chunkSize else { return }
      let chunkCount = Int((length + chunkSize - 1) / chunkSize)
      for (index, chunk) in state.partial
      where index >= chunkCount || Int64(index) * chunkSize + chunk.end > length {
        throw StoreError.outOfBounds(
          objectID, range: Int64(index) * chunkSize..<Int64(index) * chunkSize + chunk.end, length: length)
      }
      view.withLock { view in
        view.manifest.contentLength = length
        // Spans from other writers that reach past the length go; one that is the whole last chunk completes it.
        let before = view.manifest.chunkCRCs
        view.manifest.fitSpans(toLength: length)
        for (index, crc) in view.manifest.chunkCRCs where before[index] == nil {
          view.pending.added[index] = crc
          view.pending.spans[index] = nil
        }
      }
      try file.setSize(length)
      if chunkCount > 0 { try completeIfCovered(chunkCount - 1, &state) }
      // The length is part of the object's identity: it is committed even before any chunk completes.
      view.withLock { $0.pending.contentLength = length }
    }
  }

  /// A chunk's parts as the view knows them (spans committed by this or another writer, or published earlier),
  /// so that bytes written now join them.
  private func seededPartial(_ index: Int, chunkStart: Int64) -> PartialChunk {
    var partial = PartialChunk()
    for span in view.withLock({ $0.manifest.spans[index] ?? [] }) {
      partial.add((span.range.lowerBound - chunkStart)..<(span.range.upperBound - chunkStart), crc: span.crc)
    }
    return partial
  }

  /// Publishes the parts of incomplete chunk `index` whose CRC is known as its spans: readable at once, and
  /// listed by the next commit.
  private func publishSpans(_ index: Int, _ partial: PartialChunk, chunkStart: Int64) {
    let spans = partial.runs.compactMap { run in
      run.crc.map {
        Manifest.Span(
          range: (chunkStart + run.range.lowerBound)..<(chunkStart + run.range.upperBound), crc: $0)
      }
    }
    view.withLock { view in
      guard !view.manifest.isPresent(index) else { return }
      view.manifest.spans[index] = spans.isEmpty ? nil : spans
      view.pending.spans[index] = spans.isEmpty ? nil : spans
    }
  }

  /// Makes chunk `index` present if its written parts now cover it: its CRC is combined from theirs (or read
  /// back from disk where parts overlapped).
  private func completeIfCovered(_ index: Int, _ state: inout State) throws {
    guard let chunk = state.partial[index] else { return }
    let (chunkSize, length) = view.withLock { (Int64($0.manifest.chunkSize), $0.manifest.contentLength) }
    let needed = length.map { min(chunkSize, $0 - Int64(index) * chunkSize) } ?? chunkSize
    guard chunk.covers(needed) else { return }
    var crc: UInt32
    if let combined = chunk.crc, chunk.end == needed {
      crc = combined
    } else {
      // Overlapping rewrites: the CRC is taken from the bytes on disk.
      let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(needed), alignment: 16)
      defer { buffer.deallocate() }
      let count = try mapIO { try file.handle.read(into: buffer, at: Int64(index) * chunkSize) }
      guard count == Int(needed) else { return }
      crc = CRC32.checksum(UnsafeRawBufferPointer(buffer))
    }
    state.partial[index] = nil
    view.withLock { view in
      view.manifest.setChunk(index, crc: crc)
      view.pending.added[index] = crc
      view.pending.dropped[index] = nil
      view.pending.spans[index] = nil
    }
    state.uncommittedBytes += needed
    observer.chunkCompleted?(needed)
  }

  // MARK: Metadata

  /// Applies `change` to the view's manifest and to what the next commit writes, if the object is at version
  /// `versionTag` (nil: whatever its version); throws `StoreError.versionChanged` if not.
  func setMetadata(
    ifVersion versionTag: UInt32? = nil, _ change: (inout Manifest, inout ManifestChange) -> Void
  )
    throws
  {
    try state.withLock { _ in
      try ensureWritable()
      try view.withLock { view in
        try checkVersion(versionTag, of: view.manifest)
        change(&view.manifest, &view.pending)
      }
    }
  }

  /// Throws `StoreError.versionChanged` unless `manifest` is at version `versionTag` (nil: any version).
  private func checkVersion(_ versionTag: UInt32?, of manifest: Manifest) throws {
    if let versionTag, manifest.versionTag != versionTag {
      throw StoreError.versionChanged(objectID, expected: versionTag, current: manifest.versionTag)
    }
  }

  /// See `FileHandleAssetDataManager.reset(contentLength:etag:lastModified:ifVersion:)`.
  func reset(contentLength: Int64?, etag: String?, lastModified: String?, ifVersion versionTag: UInt32?)
    throws
    -> UInt32
  {
    try withNoCommitInFlight { state in
      try ensureWritable()
      let tag = try view.withLock { view in
        try checkVersion(versionTag, of: view.manifest)
        var fresh = Manifest(
          objectID: objectID, chunkSize: view.manifest.chunkSize, contentLength: contentLength,
          contentType: view.manifest.contentType, etag: etag, lastModified: lastModified,
          isPinned: view.manifest.isPinned, userMetadata: view.manifest.userMetadata)
        fresh.group = view.manifest.group
        fresh.createdAt = Date()
        fresh.versionTag = UInt32.random(in: 1...UInt32.max)
        view.manifest = fresh
        view.pending = ManifestChange()
        view.pending.reset = true
        return fresh.versionTag
      }
      state.partial = [:]
      // The manifest that lists none of the old chunks first, then the file cut: cut first, a crash or a
      // failed commit (a full disk) in between would leave the old manifest claiming chunks whose bytes are
      // gone (invariant 2). This way round the worst is a data file longer than its object, which nothing
      // reads past the manifest's chunks. So a cut that fails after the commit does not fail the reset, which
      // has taken effect: the file only keeps bytes no chunk lists.
      try commitLocked(&state)
      _ = try? mapIO { try file.handle.truncate(to: contentLength ?? 0) }
      return tag
    }
  }

  // MARK: Dropping a chunk

  /// Chunk `index` failed its CRC on read (`VerifiedChunkReader`): it is dropped from the view and, at once
  /// unless a batch is in flight, from the manifest on disk, if it is still the chunk that was read (version
  /// `version`, CRC `expected`). Throws `StoreError.notCached` for `range` if it is not (dropped or reset
  /// meanwhile: what was read says nothing about the chunk now).
  func dropChunk(_ index: Int, expected: UInt32, version: UInt32, range: Range<Int64>) throws {
    try state.withLock { state in
      let dropped = try view.withLock { view -> Bool in
        try self.view.ensureOpen(view)
        guard view.manifest.versionTag == version, view.manifest.crc(ofChunk: index) == expected else {
          return false
        }
        view.manifest.removeChunk(index)
        view.pending.added[index] = nil
        view.pending.dropped[index] = expected
        return true
      }
      guard dropped else { throw StoreError.notCached(objectID, missing: [range]) }
      observer.chunksDropped?(objectID, 1)
      if isWritable {
        // With a batch in flight the drop goes with the next one (a commit now could list that batch's chunks
        // before they are flushed).
        if !view.withLock({ $0.commitInFlight }) { try commitLocked(&state) }
      } else if let writer = try? SystemFile(path: store.paths(for: objectID).data, writable: true) {
        // A reader still records the drop, through a descriptor that may take the commit lock.
        let (change, base) = view.withLock { view -> (ManifestChange, Manifest) in
          defer { view.pending = ManifestChange() }
          return (view.pending, view.manifest)
        }
        _ = try? store.commit(change, base: base, dataFile: writer)
        writer.close()
      }
    }
  }

  /// `span` failed its CRC on read: it is forgotten by the view and by this writer's parts of its chunk, and
  /// dropped from the manifest by the next commit (if the disk still lists exactly it).
  func dropSpan(_ span: Manifest.Span) {
    state.withLock { state in
      let index = view.withLock { view -> Int in
        view.manifest.removeSpan(span)
        view.pending.droppedSpans.append(span)
        let index = Int(span.range.lowerBound / Int64(view.manifest.chunkSize))
        view.pending.spans[index]?.removeAll { $0 == span }
        if view.pending.spans[index]?.isEmpty == true { view.pending.spans[index] = nil }
        return index
      }
      state.partial[index] = nil
    }
  }

  // MARK: Checks

  func ensureWritable() throws {
    try view.withLock { try view.ensureOpen($0) }
    if !isWritable {
      throw StoreError.io(
        operation: "write", path: FilePath(store.paths(for: objectID).data), errno: .badFileDescriptor)
    }
  }

  func reportBackgroundError(_ state: inout State) throws {
    if let error = state.backgroundError {
      state.backgroundError = nil
      throw error
    }
  }
}
