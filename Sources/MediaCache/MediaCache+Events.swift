import Foundation
import Synchronization

extension MediaCache {
  // MARK: Limits and events

  /// The compaction engine with this cache's limits (`limits`).
  public var compactor: Compactor {
    let limits = self.limits
    return Compactor(
      store: store,
      policy: CompactionPolicy(
        maxSize: limits.maxSize, lowWatermark: limits.lowWatermark, maxAge: limits.maxAge,
        minFree: limits.minFree, keepHeads: limits.keepHeads, tmpGracePeriod: Self.temporaryFileGracePeriod),
      shouldEvict: configuration.shouldEvict)
  }

  /// Runs a compaction pass now (age, size and free-space limits; tmp reaping) and returns what it did.
  @discardableResult
  public func purge() async throws -> CompactionReport {
    await closing.waitForAll()
    let report = try await IOExecutor.shared.run { [compactor] in try compactor.runPass() }
    for object in report.removed { memory.remove(object.id) }
    tracking.withLock { tracking in
      tracking.approximateBytes = report.bytesAfter + tracking.writtenDuringPass
      tracking.passHasRun = true
      tracking.lastPassMissedWrites = tracking.writtenDuringPass > 0
      tracking.writtenDuringPass = 0
    }
    if !report.removed.isEmpty { emit(.removed(report.removed)) }
    if !report.trimmed.isEmpty { emit(.trimmed(report.trimmed)) }
    return report
  }

  /// A stream of the cache's events (evictions, removals, dropped chunks, crossing the size limit). Each call
  /// returns a new stream; it ends when the consumer stops iterating. The newest 1000 unread events are kept.
  public func events() -> AsyncStream<CacheEvent> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: CacheEvent.self, bufferingPolicy: .bufferingNewest(1000))
    let id = UUID()
    tracking.withLock { $0.subscribers[id] = continuation }
    continuation.onTermination = { [weak self] _ in
      _ = self?.tracking.withLock { $0.subscribers.removeValue(forKey: id) }
    }
    return stream
  }

  func emit(_ event: CacheEvent) {
    let subscribers = tracking.withLock { Array($0.subscribers.values) }
    for subscriber in subscribers { subscriber.yield(event) }
  }

  func adjustTrackedBytes(by delta: Int64) {
    tracking.withLock { tracking in
      if let bytes = tracking.approximateBytes { tracking.approximateBytes = max(0, bytes + delta) }
    }
  }

  /// Callbacks given to every data manager this cache opens.
  var observer: FileHandleAssetDataManager.Observer {
    FileHandleAssetDataManager.Observer(
      chunkCompleted: { [weak self] bytes in self?.noteWritten(bytes) },
      chunksDropped: { [weak self] id, count in self?.emit(.chunksDropped(id, count: count)) })
  }

  /// Counts written bytes; under a size limit (`limits`, read at each write), the first write, or crossing
  /// `maxSize`, starts one background pass.
  private func noteWritten(_ bytes: Int64) {
    let trigger = tracking.withLock { tracking -> (start: Bool, exceeded: Int64?, maxSize: Int64) in
      if tracking.compactionRunning { tracking.writtenDuringPass += bytes }
      // Without a size limit no pass is ever started behind the app's back; a known total still counts.
      guard let maxSize = tracking.limits.maxSize else {
        if let known = tracking.approximateBytes { tracking.approximateBytes = known + bytes }
        return (false, nil, 0)
      }
      guard let known = tracking.approximateBytes, tracking.passHasRun else {
        // The total is learned by a pass, not by walking the tree at open.
        if let recorded = tracking.approximateBytes { tracking.approximateBytes = recorded + bytes }
        if tracking.compactionRunning { return (false, nil, maxSize) }
        tracking.compactionRunning = true
        return (true, nil, maxSize)
      }
      let now = known + bytes
      tracking.approximateBytes = now
      guard now > maxSize, !tracking.compactionRunning else { return (false, nil, maxSize) }
      tracking.compactionRunning = true
      return (true, now, maxSize)
    }
    let maxSize = trigger.maxSize
    if let exceeded = trigger.exceeded { emit(.exceededMaxSize(bytes: exceeded)) }
    if trigger.start {
      Task.detached { [self] in
        // A second pass when writes during the first left the total over the limit (no later write may
        // come to start one).
        for _ in 0..<2 {
          _ = try? await self.purge()
          let again = self.tracking.withLock { tracking in
            tracking.lastPassMissedWrites && (tracking.approximateBytes ?? 0) > maxSize
          }
          if !again { break }
        }
        self.tracking.withLock { $0.compactionRunning = false }
      }
    }
  }
}
