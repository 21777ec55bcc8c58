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
  public func scanObjects() throws -> [ScannedObject] {
    var found: [ObjectID: ScannedObject] = [:]
    try mapIO {
      for outer in try FileSystemCalls.scanDirectory(objectsDirectory) ?? []
      where outer.status.isDirectory && Self.isShardName(outer.name) {
        let outerPath = "\(objectsDirectory)/\(outer.name)"
        for inner in try FileSystemCalls.scanDirectory(outerPath) ?? []
        where inner.status.isDirectory && Self.isShardName(inner.name) {
          let prefix = outer.name + inner.name
          for entry in try FileSystemCalls.scanDirectory("\(outerPath)/\(inner.name)") ?? []
          where entry.status.isRegular {
            let name = entry.name
            let isData = name.hasSuffix(".data")
            guard isData || name.hasSuffix(".manifest") else { continue }
            let hex = name.prefix(64)
            guard hex.hasPrefix(prefix), name.utf8.count == 64 + (isData ? 5 : 9), let id = ObjectID(hex: hex)
            else { continue }
            var object =
              found[id]
              ?? ScannedObject(
                id: id, manifestModified: nil, manifestBytes: 0, dataBytes: 0, dataModified: nil)
            if isData {
              object.dataBytes = entry.status.allocatedBytes
              object.dataModified = entry.status.modified
            } else {
              object.manifestBytes = entry.status.size
              object.manifestModified = entry.status.modified
            }
            found[id] = object
          }
        }
      }
    }
    return Array(found.values)
  }

  /// Whether some process has the object open (its data file's `flock` cannot be taken exclusively). Changes
  /// nothing.
  public func isBusy(_ id: ObjectID) throws -> Bool {
    try checkFileTypes(of: id)
    return try mapIO {
      let file: SystemFile
      do {
        file = try SystemFile(path: paths(for: id).data, writable: false)
      } catch let error as SystemCallError where error.errno == .noSuchFileOrDirectory {
        return false
      }
      defer { file.close() }
      return !(try file.lock(exclusive: true, wait: false))
    }
  }

  /// Result of scrubbing part of one object.
  public struct ScrubResult: Sendable, Equatable {
    /// Chunks whose CRC was checked.
    public var chunksVerified = 0
    /// Bytes read to check them.
    public var bytesVerified: Int64 = 0
    /// Chunks that failed and were dropped (or, in a dry run, would be).
    public var droppedChunks: [Int] = []
    /// The chunk to continue from when the budget ran out, nil when the object was finished.
    public var resumeChunk: Int?
    /// The object was skipped: being removed, or gone.
    public var skipped = false
  }

  /// Verifies the CRCs of the object's present chunks from `firstChunk`, reading at most `budget` bytes, and
  /// drops (merged under the commit lock) every chunk that fails unless `dryRun`. Does not bump recency.
  public func scrub(_ id: ObjectID, fromChunk firstChunk: Int = 0, budget: Int64, dryRun: Bool = false) throws
    -> ScrubResult
  {
    var result = ScrubResult()
    let paths = paths(for: id)
    try checkFileTypes(of: id)
    return try mapIO {
      let file: SystemFile
      do {
        file = try SystemFile(path: paths.data, writable: !dryRun)
      } catch let error as SystemCallError where error.errno == .noSuchFileOrDirectory {
        result.skipped = true
        return result
      }
      defer { file.close() }
      // Shared, like any user; fails only while a remover holds it exclusively.
      guard try file.lock(exclusive: false, wait: false),
        let current = try FileSystemCalls.status(paths.data), try current.inode == file.status().inode
      else {
        result.skipped = true
        return result
      }
      let manifest: Manifest
      do {
        guard let read = try readManifest(id) else {
          result.skipped = true
          return result
        }
        manifest = read
      } catch StoreError.corruptManifest {
        result.skipped = true
        return result
      }
      var failed: [Int: UInt32] = [:]
      let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: manifest.chunkSize, alignment: 16)
      defer { buffer.deallocate() }
      for index in manifest.chunkCRCs.keys.sorted() where index >= firstChunk {
        let range = manifest.byteRange(ofChunk: index)
        if result.bytesVerified > 0 && result.bytesVerified + Int64(range.count) > budget {
          result.resumeChunk = index
          break
        }
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(range.count)])
        let count = try file.read(into: target, at: range.lowerBound)
        let crc = CRC32.checksum(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        let expected = manifest.crc(ofChunk: index)!
        if count != target.count || crc != expected { failed[index] = expected }
        result.chunksVerified += 1
        result.bytesVerified += Int64(range.count)
      }
      result.droppedChunks = failed.keys.sorted()
      if !failed.isEmpty && !dryRun {
        var change = ManifestChange()
        change.dropped = failed
        _ = try commit(change, base: manifest, dataFile: file)
      }
      return result
    }
  }
}
