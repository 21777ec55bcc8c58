import Foundation

/// The compaction engine: enforces age, size and free-space limits by evicting least recently used objects,
/// reaps stale staging files, removes orphan data files (a removal cut short) and scrubs chunk CRCs a budget
/// at a time. The same code runs in an app
/// (`MediaCache.purge()`) and in the `cache-compactor` process.
///
/// A pass orders objects by `stat` alone (the manifest's mtime is the recency stamp) and parses only the
/// manifests of eviction candidates. It never removes a pinned object, one the app vetoes, or one that any
/// process has open (the exclusive non-blocking `flock` fails: counted as busy).
public struct Compactor: Sendable {
  /// The on-disk store whose objects a pass scans, evicts and scrubs.
  package let store: ShardedStore
  /// The limits a pass enforces, and whether it is a dry run.
  public let policy: CompactionPolicy
  /// The app's veto: return false to keep a candidate.
  public let shouldEvict: (@Sendable (EvictionCandidate) -> Bool)?

  /// The file, under the cache root, that remembers where the scrub stopped.
  public static let scrubCursorName = "compactor.cursor"

  /// An engine that compacts the cache at `directory` under `policy`, asking `shouldEvict` (when given) before
  /// each eviction; drops found by the scrub are committed with `durability`. Throws `StoreError` (code
  /// `noSuchCache`, `notACache`, `unsupportedFormat`) when `directory` is not a cache; it is never created.
  /// Opening reads the `FORMAT` marker; `runPass` does the work.
  public init(
    directory: FilePath, policy: CompactionPolicy, durability: Durability = .durable,
    shouldEvict: (@Sendable (EvictionCandidate) -> Bool)? = nil
  ) throws {
    self.init(
      store: try ShardedStore(root: directory.string, durability: durability, create: false), policy: policy,
      shouldEvict: shouldEvict)
  }

  /// An engine over an open store (the cache's own passes, `cache-compactor`).
  package init(
    store: ShardedStore, policy: CompactionPolicy, shouldEvict: (@Sendable (EvictionCandidate) -> Bool)? = nil
  ) {
    self.store = store
    self.policy = policy
    self.shouldEvict = shouldEvict
  }

  /// Runs one pass. `isCancelled` is polled between objects; a cancelled or timed-out pass reports
  /// `incomplete` and leaves a consistent tree. `now` is seconds since the epoch (the clock ages are
  /// measured against).
  ///
  /// Throws `StoreError` when the tree cannot be walked or `tmp/` cannot be listed; an error confined to one
  /// object, or a scrub position that cannot be saved (a full disk), is recorded in `CompactionReport.errors`
  /// instead.
  public func runPass(
    now: Double = Date().timeIntervalSince1970, isCancelled: @Sendable () -> Bool = { false }
  ) throws -> CompactionReport {
    let started = Date()
    let deadline = started.addingTimeInterval(policy.maxPassDuration.seconds)
    func mustStop() -> Bool { isCancelled() || Date() >= deadline }
    var report = CompactionReport()
    report.dryRun = policy.dryRun

    report.tmpReaped = try reapTemporaryFiles(now: now)
    let objects = try store.scanObjects()
    report.objectsScanned = objects.count
    report.bytesBefore = objects.reduce(0) { $0 + $1.diskBytes }
    var total = report.bytesBefore
    var removedIDs = Set<ObjectID>()

    // Data files without a manifest: a removal cut short between its two unlinks (a crash, a SIGKILL), or a
    // writer that died before its first commit. No manifest lists their bytes, so nothing can read them;
    // each one nobody has open goes now, whatever the limits, so a killed pass is finished by the next.
    for object in objects where object.manifestModified == nil && object.dataModified != nil {
      if mustStop() {
        report.incomplete = true
        break
      }
      if let freed = removeOrphan(object, into: &report) {
        total -= freed
        report.bytesFreed += freed
        removedIDs.insert(object.id)
      }
    }

    // Oldest first; ties broken by id so passes are reproducible.
    let byRecency = objects.filter { !removedIDs.contains($0.id) }.sorted {
      ($0.lastAccess, $0.id) < ($1.lastAccess, $1.id)
    }

    // Objects the age limit tried and kept (pinned, vetoed, busy): counted once, if the size limit tries them too.
    var keptByAge: Set<ObjectID> = []
    if let maxAge = policy.maxAge {
      for object in byRecency where now - object.lastAccess > maxAge.seconds {
        if mustStop() {
          report.incomplete = true
          break
        }
        let counted = (report.pinnedKept, report.vetoed, report.skippedBusy)
        if evict(object, reason: .age, into: &report) != nil {
          total -= object.diskBytes
          removedIDs.insert(object.id)
        } else if counted != (report.pinnedKept, report.vetoed, report.skippedBusy) {
          keptByAge.insert(object.id)
        }
      }
    }

    var bytesToFree: Int64 = 0
    if let maxSize = policy.maxSize, total > maxSize {
      bytesToFree = total - Int64(Double(maxSize) * policy.lowWatermark)
    }
    if let minFree = policy.minFree {
      let available = try mapIO { try FileSystemCalls.availableBytes(store.root) }
      if available < minFree {
        let slack = Int64(Double(minFree) * (1 - policy.lowWatermark))
        bytesToFree = max(bytesToFree, minFree - available + slack)
      }
    }
    var freed: Int64 = 0
    var trimmedBytes: [ObjectID: Int64] = [:]
    if bytesToFree > 0 && !report.incomplete, let window = policy.keepHeads {
      // Tails first, least recently used first; whole objects only if that is not enough.
      // Without a planner, an object no larger than the window has nothing to cut.
      let floor = window.planner == nil ? window.bytes : 0
      for object in byRecency where !removedIDs.contains(object.id) && object.dataBytes > floor {
        if freed >= bytesToFree { break }
        if mustStop() {
          report.incomplete = true
          break
        }
        if let cut = trim(object, keeping: window, into: &report) {
          freed += cut
          total -= cut
          trimmedBytes[object.id] = cut
        }
      }
    }
    if bytesToFree > 0 && !report.incomplete && freed < bytesToFree {
      for var object in byRecency where !removedIDs.contains(object.id) {
        if freed >= bytesToFree { break }
        if mustStop() {
          report.incomplete = true
          break
        }
        object.dataBytes = max(0, object.dataBytes - (trimmedBytes[object.id] ?? 0))
        let counted = (report.pinnedKept, report.vetoed, report.skippedBusy)
        if let bytes = evict(object, reason: .size, into: &report) {
          freed += bytes
          total -= bytes
          removedIDs.insert(object.id)
        } else if keptByAge.contains(object.id) {
          // The report counts the objects kept, not the tries.
          (report.pinnedKept, report.vetoed, report.skippedBusy) = counted
        }
      }
    }
    report.bytesAfter = total

    if policy.scrubBudget > 0 && !report.incomplete {
      let remaining = objects.lazy.map(\.id).filter { !removedIDs.contains($0) }
      try scrub(Array(remaining).sorted(), into: &report, mustStop: mustStop)
    }
    report.duration = .seconds(Date().timeIntervalSince(started))
    // The total for processes that open the cache later (`usage`; a dry run or a cut-short pass says less).
    if !policy.dryRun && !report.incomplete { try? store.recordUsage(report.bytesAfter) }
    // Evictions, cuts and scrub drops to swift-metrics (`CacheMetrics`; no-op without a backend).
    CacheMetrics.noteCompaction(report)
    return report
  }

  // MARK: Eviction

  /// Cuts one idle object down to what `window` keeps unless pinned, vetoed or busy; returns the bytes freed
  /// (or, dry, that would be), nil when nothing went. Busy, pinned and vetoed objects are not counted here:
  /// the eviction that may follow counts them. The app's veto is asked before the cut, with the window's
  /// byte count as `trimmedFrom` (what a planner keeps is known only under the cut's lock).
  private func trim(_ object: ScannedObject, keeping window: HeadWindow, into report: inout CompactionReport)
    -> Int64?
  {
    do {
      if let shouldEvict {
        let manifest = try store.readManifest(object.id)
        let candidate = EvictionCandidate(
          id: object.id, manifest: manifest, reason: .size, bytes: object.diskBytes,
          lastAccess: object.lastAccess, trimmedFrom: window.bytes)
        guard manifest?.isPinned != true, shouldEvict(candidate) else { return nil }
      }
      // Nothing freed (only unlisted bytes lay outside what is kept, already in holes): not reported as a cut.
      guard let result = try store.trim(object.id, keeping: window, dryRun: policy.dryRun),
        result.bytesFreed > 0
      else { return nil }
      report.bytesFreed += result.bytesFreed
      report.trimmed.append(
        TrimmedObject(
          id: object.id, keptHead: result.keptHead, keptRanges: result.kept, bytes: result.bytesFreed))
      return result.bytesFreed
    } catch let error as StoreError where error.code == .busy || error.code == .kept {
      return nil
    } catch let error as StoreError where error.code == .corruptManifest {
      return nil
    } catch {
      report.errors.append("\(object.id): trim: \(error)")
      return nil
    }
  }

  /// Evicts one object unless pinned, vetoed or busy; returns the bytes freed (or, dry, that would be), nil
  /// if it stays. One object's failure (an unreadable manifest, an I/O error) is recorded and the pass goes on.
  private func evict(_ object: ScannedObject, reason: RemovalReason, into report: inout CompactionReport)
    -> Int64?
  {
    do {
      return try evictOrThrow(object, reason: reason, into: &report)
    } catch {
      report.errors.append("\(object.id): \(error)")
      return nil
    }
  }

  private func evictOrThrow(
    _ object: ScannedObject, reason: RemovalReason, into report: inout CompactionReport
  ) throws -> Int64? {
    var manifest: Manifest?
    var reason = reason
    do {
      manifest = try store.readManifest(object.id)
    } catch let error as StoreError where error.code == .corruptManifest {
      reason = .corrupt
    }
    if manifest?.isPinned == true {
      report.pinnedKept += 1
      return nil
    }
    let candidate = EvictionCandidate(
      id: object.id, manifest: manifest, reason: reason, bytes: object.diskBytes,
      lastAccess: object.lastAccess)
    if let shouldEvict, !shouldEvict(candidate) {
      report.vetoed += 1
      return nil
    }
    let bytes: Int64
    if policy.dryRun {
      if try store.isBusy(object.id) {
        report.skippedBusy += 1
        return nil
      }
      bytes = object.diskBytes
    } else {
      do {
        bytes = try store.remove(object.id, keepIf: { $0?.isPinned == true })
      } catch let error as StoreError where error.code == .busy {
        report.skippedBusy += 1
        return nil
      } catch let error as StoreError where error.code == .kept {
        report.pinnedKept += 1
        return nil
      }
    }
    report.evicted[reason, default: 0] += 1
    report.bytesFreed += bytes
    report.removed.append(
      RemovedObject(
        id: object.id, userMetadata: manifest?.userMetadata ?? Data(), bytes: bytes, reason: reason))
    return bytes
  }

  /// Removes an orphan data file unless some process has it open or a manifest appeared since the scan (a
  /// writer's first commit); returns the bytes freed, nil if it stays.
  private func removeOrphan(_ object: ScannedObject, into report: inout CompactionReport) -> Int64? {
    do {
      if policy.dryRun {
        guard try !store.isBusy(object.id) else { return nil }
        report.orphansRemoved += 1
        return object.diskBytes
      }
      let freed = try store.remove(object.id, keepIf: { $0 != nil })
      report.orphansRemoved += 1
      return freed
    } catch let error as StoreError where error.code == .busy || error.code == .kept {
      return nil
    } catch {
      report.errors.append("\(object.id): orphan data: \(error)")
      return nil
    }
  }

  private func reapTemporaryFiles(now: Double) throws -> Int {
    // Links in files/ to objects removed since (`fileURL(for:)`): no report field of their own.
    _ = try? store.reapDanglingFileLinks(dryRun: policy.dryRun)
    return try store.reapStaleTemporaryFiles(
      olderThan: policy.tmpGracePeriod.seconds, now: now, dryRun: policy.dryRun)
  }

  // MARK: Scrubbing

  /// Verifies up to `scrubBudget` bytes of chunks, starting where the last pass stopped (ids ascending, wrapping).
  private func scrub(_ ids: [ObjectID], into report: inout CompactionReport, mustStop: () -> Bool) throws {
    guard !ids.isEmpty else { return }
    let cursor = readCursor()
    var start = 0
    var startChunk = 0
    if let cursor {
      start = ids.firstIndex { $0 >= cursor.id } ?? 0
      if start < ids.count && ids[start] == cursor.id { startChunk = cursor.chunk }
    }
    var budget = policy.scrubBudget
    var next: (id: ObjectID, chunk: Int)?
    for step in 0..<ids.count {
      let id = ids[(start + step) % ids.count]
      if budget <= 0 || mustStop() {
        next = (id, 0)
        break
      }
      let result: ShardedStore.ScrubResult
      do {
        result = try store.scrub(
          id, fromChunk: step == 0 ? startChunk : 0, budget: budget, dryRun: policy.dryRun)
      } catch {
        report.errors.append("\(id): scrub: \(error)")
        continue
      }
      budget -= result.bytesVerified
      report.chunksScrubbed += result.chunksVerified
      report.bytesScrubbed += result.bytesVerified
      if !result.droppedChunks.isEmpty {
        report.chunksDropped += result.droppedChunks.count
        report.droppedChunks[id] = result.droppedChunks
      }
      if let resume = result.resumeChunk {
        next = (id, resume)
        break
      }
    }
    guard !policy.dryRun else { return }
    // Everything verified: start over where this pass began.
    let position = next ?? (ids[start], 0)
    do {
      try writeCursor(position.id, chunk: position.chunk)
    } catch {
      // A full disk is when passes matter most: the pass stands, and the next one scrubs from the last position
      // saved (some chunks twice).
      report.errors.append("scrub position not saved: \(error)")
    }
  }

  private var cursorPath: String { "\(store.root)/\(Self.scrubCursorName)" }

  /// The saved scrub position: `<64 hex> <chunk>`; nil if absent or unreadable (then the scrub starts over).
  func readCursor() -> (id: ObjectID, chunk: Int)? {
    guard let text = try? String(contentsOfFile: cursorPath, encoding: .utf8) else { return nil }
    let parts = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
    guard parts.count == 2, let id = ObjectID(hex: parts[0]), let chunk = Int(parts[1]), chunk >= 0 else {
      return nil
    }
    return (id, chunk)
  }

  private func writeCursor(_ id: ObjectID, chunk: Int) throws {
    let staging = "\(store.tmpDirectory)/compactor.cursor.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
    do {
      try mapIO {
        let file = try SystemFile(path: staging, writable: true, create: true)
        defer { file.close() }
        try Array("\(id.hex) \(chunk)\n".utf8).withUnsafeBytes { try file.write($0, at: 0) }
        try FileSystemCalls.renameFile(staging, to: cursorPath)
      }
    } catch {
      _ = try? FileSystemCalls.unlinkFile(staging)
      throw error
    }
  }
}
