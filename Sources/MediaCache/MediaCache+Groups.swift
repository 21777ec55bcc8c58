import Foundation

extension MediaCache {
  // MARK: Groups

  /// Puts the cached object for `requested` in `group` (nil: in none). Throws `StoreError.notFound` if nothing
  /// is cached, `StoreError.invalidGroup` or `StoreError.fieldTooLarge` for a name that cannot be used.
  public func setGroup(_ group: String?, for requested: String) async throws {
    if let group { try GroupName.validated(group) }
    let id = objectID(for: requested)
    closing.closeIdle(id)
    await closing.wait(for: id)
    try await IOExecutor.shared.run { [store] in
      guard try store.readManifest(id) != nil else { throw StoreError.notFound(id) }
      let manager = try FileHandleAssetDataManager(store: store, id: id, writable: true)
      defer { try? manager.close() }
      try manager.setGroup(group)
      try manager.flush()
    }
  }

  /// The objects on disk in `group`, in id order: the group index's entries whose manifest names the group.
  /// Reads one index directory and the members' manifests, never the whole tree.
  public func objects(inGroup group: String) async throws -> [ObjectID] {
    try GroupName.validated(group)
    return try await IOExecutor.shared.run { [store] in
      try store.groupEntries(group).filter { (try? store.readManifest($0))??.group == group }
    }
  }

  /// Removes every object of `group` from memory and disk, as `remove` removes one: pinned members go too, a
  /// member some process has open stays and is listed in `busy`, and one `.removed` event (reason `.manual`)
  /// names the objects removed. Finds the members through the group index, so the cost depends on the group's
  /// size, not the cache's. Throws `StoreError.invalidGroup` or `StoreError.fieldTooLarge` for a name that
  /// cannot be used; a group with no objects removes nothing.
  @discardableResult
  public func remove(group: String) async throws -> RemovalReport {
    try GroupName.validated(group)
    let candidates = try await IOExecutor.shared.run { [store] in try store.groupEntries(group) }
    var memoryFreed: Int64 = 0
    for id in candidates {
      memoryFreed += Int64(memory.data(for: id)?.count ?? 0)
      memory.remove(id)
      closing.closeIdle(id)
    }
    for id in candidates { await closing.wait(for: id) }
    var report = try await IOExecutor.shared.run { [self] in try removeNow(candidates, group: group) }
    report.memoryBytesFreed = memoryFreed
    return report
  }

  private func removeNow(_ candidates: [ObjectID], group: String) throws -> RemovalReport {
    var report = RemovalReport(objectsRemoved: 0, bytesFreed: 0, memoryBytesFreed: 0, busy: [])
    var removed: [RemovedObject] = []
    for id in candidates {
      var metadata = Data()
      do {
        // Re-checked under the object's exclusive lock: a member that left the group since is kept.
        let bytes = try store.remove(id) { manifest in
          metadata = manifest?.userMetadata ?? Data()
          return manifest?.group != group
        }
        if bytes > 0 {
          report.objectsRemoved += 1
          report.bytesFreed += bytes
          removed.append(RemovedObject(id: id, userMetadata: metadata, bytes: bytes, reason: .manual))
        }
        try store.removeGroupEntry(id, group: group)  // gone already unless the object was
      } catch let error as StoreError where error.code == .busy {
        report.busy.append(id)
      } catch let error as StoreError where error.code == .kept {
        try store.removeGroupEntry(id, group: group)  // not (or no longer) a member: a stale entry
      } catch let error as StoreError where error.code == .unexpectedFileType {
        continue  // a symlink, FIFO or file where the layout has none: left alone (cache-fsck reports it)
      }
    }
    adjustTrackedBytes(by: -report.bytesFreed)
    if !removed.isEmpty { emit(.removed(removed)) }
    return report
  }
}
