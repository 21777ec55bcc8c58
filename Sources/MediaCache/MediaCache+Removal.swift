import Foundation

extension MediaCache {
  // MARK: Removal and pinning

  /// Removes the object from memory and disk; returns the disk bytes freed. Throws `StoreError.busy` if some
  /// process has it open (it stays).
  @discardableResult
  public func remove(_ requested: String) async throws -> Int64 {
    let id = objectID(for: requested)
    memory.remove(id)
    closing.closeIdle(id)
    await closing.wait(for: id)
    let (metadata, bytes) = try await IOExecutor.shared.run { [store] in
      ((try? store.readManifest(id))?.userMetadata ?? Data(), try store.remove(id))
    }
    if bytes > 0 {
      adjustTrackedBytes(by: -bytes)
      emit(.removed([RemovedObject(id: id, userMetadata: metadata, bytes: bytes, reason: .manual)]))
    }
    return bytes
  }

  /// Removes every object that no process has open.
  @discardableResult
  public func removeAll() async throws -> RemovalReport {
    closing.closeIdle(nil)
    await closing.waitForAll()
    return try await IOExecutor.shared.run { [self] in try removeAllNow() }
  }

  private func removeAllNow() throws -> RemovalReport {
    let memoryFreed = Int64(memory.removeAll())
    var report = RemovalReport(objectsRemoved: 0, bytesFreed: 0, memoryBytesFreed: memoryFreed, busy: [])
    var removed: [RemovedObject] = []
    for id in try store.allObjectIDs() {
      do {
        let metadata = (try? store.readManifest(id))?.userMetadata ?? Data()
        let bytes = try store.remove(id)
        report.bytesFreed += bytes
        report.objectsRemoved += 1
        removed.append(RemovedObject(id: id, userMetadata: metadata, bytes: bytes, reason: .manual))
      } catch let error as StoreError where error.code == .busy {
        report.busy.append(error.objectID ?? id)
      } catch let error as StoreError where error.code == .unexpectedFileType {
        continue  // a symlink, FIFO or file where the layout has none: left alone (cache-fsck reports it)
      }
    }
    adjustTrackedBytes(by: -report.bytesFreed)
    if !removed.isEmpty { emit(.removed(removed)) }
    return report
  }

  /// Pins the object: it is never evicted until unpinned. Throws `StoreError.notFound` if nothing is cached.
  public func pin(_ requested: String) async throws {
    closing.closeIdle(objectID(for: requested))
    await closing.wait(for: objectID(for: requested))
    try await IOExecutor.shared.run { [self] in try setPinned(requested, true) }
  }

  /// Unpins the object, so eviction may remove it again. Throws `StoreError.notFound` if nothing is cached.
  public func unpin(_ requested: String) async throws {
    closing.closeIdle(objectID(for: requested))
    await closing.wait(for: objectID(for: requested))
    try await IOExecutor.shared.run { [self] in try setPinned(requested, false) }
  }

  private func setPinned(_ requested: String, _ pinned: Bool) throws {
    let id = objectID(for: requested)
    guard try store.readManifest(id) != nil else { throw StoreError.notFound(id) }
    let manager = try FileHandleAssetDataManager(store: store, id: id, writable: true)
    defer { try? manager.close() }
    try manager.setPinned(pinned)
    try manager.flush()
  }
}
