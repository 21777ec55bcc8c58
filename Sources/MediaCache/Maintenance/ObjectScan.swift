import Foundation

/// One object as seen by a `stat`-only walk of the shard tree: enough to order by recency and to total sizes,
/// without opening or parsing anything.
public struct ScannedObject: Sendable, Equatable {
  /// The object.
  public var id: ObjectID
  /// Modification time of the manifest (the recency stamp), if there is a manifest.
  public var manifestModified: Double?
  /// Size of the manifest, 0 if none.
  public var manifestBytes: Int64
  /// Allocated bytes of the data file, 0 if none.
  public var dataBytes: Int64
  /// Modification time of the data file, if there is one.
  public var dataModified: Double?

  /// Last access: the manifest's mtime, else (an orphan data file) the data file's.
  public var lastAccess: Double { manifestModified ?? dataModified ?? 0 }
  /// Bytes on disk: allocated data blocks plus the manifest.
  public var diskBytes: Int64 { dataBytes + manifestBytes }
}

extension ShardedStore {
  /// Every object under `objects/`, from directory listings and `fstatat` alone (no file is opened).
  /// Names that are not objects of this store are skipped here (`cache-fsck` reports them).
  package func scanObjects() throws -> [ScannedObject] {
    let parts = try mapIO {
      try ObjectTreeWalker(root: root).walk({ [ObjectTreeFile]() }) { files, entry in
        if case .objectFile(let file) = entry, file.placed, file.status.isRegular { files.append(file) }
      }
    }
    var found: [ObjectID: ScannedObject] = [:]
    for file in parts.joined() {
      var object =
        found[file.id]
        ?? ScannedObject(
          id: file.id, manifestModified: nil, manifestBytes: 0, dataBytes: 0, dataModified: nil)
      if file.isData {
        object.dataBytes = file.status.allocatedBytes
        object.dataModified = file.status.modified
      } else {
        object.manifestBytes = file.status.size
        object.manifestModified = file.status.modified
      }
      found[file.id] = object
    }
    return Array(found.values)
  }

  /// Whether some process has the object open (its data file's `flock` cannot be taken exclusively). Changes
  /// nothing.
  package func isBusy(_ id: ObjectID) throws -> Bool {
    try checkFileTypes(of: id)
    return try mapIO {
      // No inode check: whatever holds the path's file now, or held it a moment ago, is using it.
      switch try ObjectLock.acquire(
        paths(for: id).data, writable: false, exclusive: true, wait: false, checkingInode: false)
      {
      case .missing, .replaced: return false
      case .held: return true
      case .locked(let file, _):
        file.close()
        return false
      }
    }
  }

  /// Result of scrubbing part of one object.
  package struct ScrubResult: Sendable, Equatable {
    /// Chunks whose CRC was checked.
    package var chunksVerified = 0
    /// Bytes read to check them.
    package var bytesVerified: Int64 = 0
    /// Chunks that failed and were dropped (or, in a dry run, would be).
    package var droppedChunks: [Int] = []
    /// Spans (bytes of incomplete chunks) that failed and were dropped (or, in a dry run, would be); spans are
    /// checked once the object's chunks are done.
    package var droppedSpans = 0
    /// The chunk to continue from when the budget ran out, nil when the object was finished.
    package var resumeChunk: Int?
    /// The object was skipped: being removed, or gone.
    package var skipped = false
  }

  /// Verifies the CRCs of the object's present chunks from `firstChunk`, reading at most `budget` bytes (then,
  /// once the chunks are done, its spans), and drops (merged under the commit lock) every chunk and span that
  /// fails unless `dryRun`. Does not bump recency.
  package func scrub(_ id: ObjectID, fromChunk firstChunk: Int = 0, budget: Int64, dryRun: Bool = false)
    throws
    -> ScrubResult
  {
    var result = ScrubResult()
    let paths = paths(for: id)
    try checkFileTypes(of: id)
    return try mapIO {
      // Shared, like any user; fails only while a remover holds it exclusively.
      guard
        case .locked(let file, _) = try ObjectLock.acquire(
          paths.data, writable: !dryRun, exclusive: false, wait: false)
      else {
        result.skipped = true
        return result
      }
      defer { file.close() }
      let manifest: Manifest
      do {
        guard let read = try readManifest(id) else {
          result.skipped = true
          return result
        }
        manifest = read
      } catch let error as StoreError where error.code == .corruptManifest {
        result.skipped = true
        return result
      }
      var failed: [Int: UInt32] = [:]
      let verifier = ChunkVerifier(chunkSize: manifest.chunkSize)
      for index in manifest.chunkCRCs.keys.sorted() where index >= firstChunk {
        let range = manifest.byteRange(ofChunk: index)
        if result.bytesVerified > 0 && result.bytesVerified + Int64(range.count) > budget {
          result.resumeChunk = index
          break
        }
        let check = try verifier.check(index, of: manifest, in: file)
        if !check.passed { failed[index] = check.expected }
        result.chunksVerified += 1
        result.bytesVerified += Int64(range.count)
      }
      result.droppedChunks = failed.keys.sorted()
      var failedSpans: [Manifest.Span] = []
      if result.resumeChunk == nil {
        for span in manifest.allSpans {
          let check = try verifier.check(span, in: file)
          if !check.passed { failedSpans.append(span) }
        }
        result.bytesVerified += manifest.allSpans.reduce(0) { $0 + Int64($1.range.count) }
      }
      result.droppedSpans = failedSpans.count
      if (!failed.isEmpty || !failedSpans.isEmpty) && !dryRun {
        var change = ManifestChange()
        change.dropped = failed
        change.droppedSpans = failedSpans
        _ = try commit(change, base: manifest, dataFile: file)
      }
      return result
    }
  }
}
