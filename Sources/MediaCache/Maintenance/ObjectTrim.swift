import Foundation

/// An object whose tail a compaction pass cut, keeping its head.
public struct TrimmedObject: Sendable, Equatable, Codable {
  /// The object's id.
  public var id: ObjectID
  /// Bytes `0..<keptHead` are kept (what was cached there still is); everything from `keptHead` on went.
  public var keptHead: Int64
  /// Bytes freed on disk.
  public var bytes: Int64

  /// A cut object (for an app's own events and tests).
  public init(id: ObjectID, keptHead: Int64, bytes: Int64) {
    self.id = id
    self.keptHead = keptHead
    self.bytes = bytes
  }

  private enum CodingKeys: String, CodingKey {
    case id = "objectID"
    case keptHead
    case bytes
  }
}

extension ShardedStore {
  /// What a tail trim found or did.
  package struct TrimResult: Sendable, Equatable {
    /// Where the kept head ends: the head window rounded up to a whole chunk.
    package var keptHead: Int64
    /// Bytes freed (in a dry run, the bytes of the chunks and spans that would go).
    package var bytesFreed: Int64
  }

  /// Cuts an idle object down to its first `head` bytes (rounded up to a whole chunk): the chunks and spans
  /// past that are dropped from the manifest under the commit lock, then the data file is truncated there, so
  /// a crash in between leaves unlisted bytes, never a listed chunk without its bytes. The manifest keeps its
  /// modification time (a trim is not an access). With `dryRun`, changes nothing and counts the listed bytes.
  ///
  /// Returns nil when there is nothing past the head (or no readable manifest: eviction handles those).
  /// Throws `StoreError.busy` if any process has the object open, `StoreError.kept` if it is pinned.
  package func trimTail(_ id: ObjectID, keepingFirst head: Int64, dryRun: Bool = false) throws -> TrimResult?
  {
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
      let firstCutChunk = Int((max(0, head) + chunkSize - 1) / chunkSize)
      let keptHead = Int64(firstCutChunk) * chunkSize
      var change = ManifestChange()
      for (index, crc) in manifest.chunkCRCs where index >= firstCutChunk { change.dropped[index] = crc }
      change.droppedSpans = manifest.allSpans.filter { $0.range.lowerBound >= keptHead }
      let before = try file.status()
      guard !change.dropped.isEmpty || !change.droppedSpans.isEmpty || before.size > keptHead else {
        return nil
      }
      if dryRun {
        let chunkBytes = change.dropped.keys.reduce(Int64(0)) {
          $0 + Int64(manifest.byteRange(ofChunk: $1).count)
        }
        let spanBytes = change.droppedSpans.reduce(Int64(0)) { $0 + Int64($1.range.count) }
        return TrimResult(keptHead: keptHead, bytesFreed: chunkBytes + spanBytes)
      }
      let recency = try FileSystemCalls.status(paths.manifest)?.modified
      if !change.dropped.isEmpty || !change.droppedSpans.isEmpty {
        _ = try commit(change, base: manifest, dataFile: file)
        if let recency { try? FileSystemCalls.setModificationTime(paths.manifest, seconds: recency) }
      }
      if before.size > keptHead { try file.truncate(to: keptHead) }
      let after = try file.status()
      return TrimResult(keptHead: keptHead, bytesFreed: max(0, before.allocatedBytes - after.allocatedBytes))
    }
  }
}
