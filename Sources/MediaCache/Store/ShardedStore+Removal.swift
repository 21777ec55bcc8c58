import Foundation

extension ShardedStore {
  // MARK: Removal

  /// Removes the object if no process has it open. Returns the bytes freed (allocated data blocks plus the
  /// manifest), 0 if there was nothing. Throws `StoreError.busy` if it is in use.
  ///
  /// `keepIf` is asked, while the object is locked exclusively, with its manifest as it is then (nil if
  /// unreadable); returning true keeps the object and throws `StoreError.kept` (an eviction must not take an
  /// object pinned since the decision).
  @discardableResult
  package func remove(_ id: ObjectID, keepIf: ((Manifest?) -> Bool)? = nil) throws -> Int64 {
    let paths = paths(for: id)
    try checkFileTypes(of: id)
    return try mapIO {
      let file: SystemFile
      let opened: FileStatus
      switch try ObjectLock.acquire(paths.data, writable: false, exclusive: true, wait: false) {
      case .missing:
        // A manifest without data: nothing can be using it.
        let size = try FileSystemCalls.status(paths.manifest)?.size ?? 0
        try FileSystemCalls.unlinkFile(paths.manifest)
        return size
      case .held, .replaced:
        // In use, or replaced or removed since we opened it: someone else is in charge of it now.
        throw StoreError.busy(id)
      case .locked(let locked, let status):
        (file, opened) = (locked, status)
      }
      defer { file.close() }
      let manifest = try? readManifest(id, checkingFileTypes: false)
      if let keepIf, keepIf(manifest) { throw StoreError.kept(id) }
      let manifestSize = try FileSystemCalls.status(paths.manifest)?.size ?? 0
      // Manifest first: a crash in between leaves an orphan data file, never a manifest without data. In the
      // durable mode the manifest's removal is made durable before the data file goes, since a file system may
      // otherwise persist the second unlink and not the first.
      try FileSystemCalls.unlinkFile(paths.manifest)
      if durability == .durable { try FileSystemCalls.syncDirectory(paths.directory) }
      try FileSystemCalls.unlinkFile(paths.data)
      FileSystemCalls.removeEmptyDirectory(paths.directory)
      FileSystemCalls.removeEmptyDirectory(paths.outerShard)
      // Its entry in the group index (GroupIndex.swift); one left behind is dropped by the group's next removal.
      if let group = manifest?.group { _ = try? removeGroupEntry(id, group: group) }
      return opened.allocatedBytes + manifestSize
    }
  }
}
