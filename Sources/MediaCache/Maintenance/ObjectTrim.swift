import Foundation

/// An object whose tail a compaction pass cut, keeping its head (`CompactionPolicy.keepHeads`).
public struct TrimmedObject: Sendable, Equatable, Codable {
  /// The object's id.
  public var id: ObjectID
  /// Bytes `0..<keptHead` are kept (what was cached there still is): the first kept range where it starts at 0,
  /// else 0.
  public var keptHead: Int64
  /// Every kept range, in whole chunks, ascending: the head, and for an MP4 whose `moov` is at its end, that too.
  public var keptRanges: [Range<Int64>]
  /// Bytes freed on disk.
  public var bytes: Int64

  /// A cut object (for an app's own events and tests); `keptRanges` defaults to `[0..<keptHead]`.
  public init(id: ObjectID, keptHead: Int64, keptRanges: [Range<Int64>]? = nil, bytes: Int64) {
    self.id = id
    self.keptHead = keptHead
    self.keptRanges = keptRanges ?? (keptHead > 0 ? [0..<keptHead] : [])
    self.bytes = bytes
  }

  private enum CodingKeys: String, CodingKey {
    case id = "objectID"
    case keptHead
    case keptRanges
    case bytes
  }
}

extension ShardedStore {
  /// What a tail trim found or did.
  package struct TrimResult: Sendable, Equatable {
    /// The kept ranges rounded out to whole chunks (clipped to the object's length), ascending and disjoint.
    package var kept: [Range<Int64>]
    /// Bytes freed (in a dry run, the bytes of the chunks and spans that would go).
    package var bytesFreed: Int64
    /// Where the kept head ends: the first kept range's end where it starts at 0, else 0.
    package var keptHead: Int64 { kept.first.map { $0.lowerBound == 0 ? $0.upperBound : 0 } ?? 0 }
  }

  /// Cuts an idle object down to what `window` keeps (its first bytes, or the ranges its planner finds, in
  /// whole chunks): the other chunks and spans are dropped from the manifest under the commit lock, then the
  /// data file is truncated after the last kept chunk and holes are punched where dropped chunks lie between
  /// kept ones, so a crash in between leaves unlisted bytes, never a listed chunk without its bytes. The
  /// manifest keeps its modification time (a trim is not an access). With `dryRun`, changes nothing and counts
  /// the listed bytes.
  ///
  /// Returns nil when nothing lies outside what is kept (or no readable manifest: eviction handles those).
  /// Throws `StoreError.busy` if any process has the object open, `StoreError.kept` if it is pinned.
  package func trim(_ id: ObjectID, keeping window: HeadWindow, dryRun: Bool = false) throws -> TrimResult? {
    let paths = paths(for: id)
    try checkFileTypes(of: id)
    return try mapIO {
      let file: SystemFile
      switch try ObjectLock.acquire(paths.data, writable: !dryRun, exclusive: true, wait: false) {
      case .missing: return nil
      case .held, .replaced: throw StoreError.busy(id)
      case .locked(let locked, _): file = locked
      }
      defer { file.close() }
      let manifest: Manifest
      do {
        guard let read = try readManifest(id) else { return nil }
        manifest = read
      } catch let error as StoreError where error.code == .corruptManifest {
        return nil
      }
      if manifest.isPinned { throw StoreError.kept(id) }
      let chunkSize = Int64(manifest.chunkSize)
      let end = manifest.contentLength ?? .max
      let keptChunks = ChunkSet(
        window.ranges(for: CachedObjectBytes(manifest: manifest, file: file)).map {
          Int($0.lowerBound / chunkSize)..<Int(($0.upperBound + chunkSize - 1) / chunkSize)
        })
      let kept = keptChunks.ranges.map {
        Int64($0.lowerBound) * chunkSize..<min(end, Int64($0.upperBound) * chunkSize)
      }
      let keptEnd = kept.last?.upperBound ?? 0
      var change = ManifestChange()
      for (index, crc) in manifest.chunkCRCs where !keptChunks.contains(index) { change.dropped[index] = crc }
      change.droppedSpans = manifest.allSpans.filter {
        !keptChunks.contains(Int($0.range.lowerBound / chunkSize))
      }
      let before = try file.status()
      guard !change.dropped.isEmpty || !change.droppedSpans.isEmpty || before.size > keptEnd else {
        return nil
      }
      if dryRun {
        let chunkBytes = change.dropped.keys.reduce(Int64(0)) {
          $0 + Int64(manifest.byteRange(ofChunk: $1).count)
        }
        let spanBytes = change.droppedSpans.reduce(Int64(0)) { $0 + Int64($1.range.count) }
        return TrimResult(kept: kept, bytesFreed: chunkBytes + spanBytes)
      }
      let recency = try FileSystemCalls.status(paths.manifest)?.modified
      if !change.dropped.isEmpty || !change.droppedSpans.isEmpty {
        _ = try commit(change, base: manifest, dataFile: file)
        if let recency { try? FileSystemCalls.setModificationTime(paths.manifest, seconds: recency) }
      }
      if before.size > keptEnd { try file.truncate(to: keptEnd) }
      // The gaps between kept ranges: their chunks are unlisted now, their blocks can go.
      for (gapStart, gapEnd) in zip(kept.dropLast().map(\.upperBound), kept.dropFirst().map(\.lowerBound)) {
        guard try file.deallocate(gapStart..<gapEnd) else { break }
      }
      let after = try file.status()
      return TrimResult(kept: kept, bytesFreed: max(0, before.allocatedBytes - after.allocatedBytes))
    }
  }
}
