import Foundation

extension ObjectWriter {
  /// What a background commit came to.
  enum BackgroundOutcome {
    case committed(CommitResult)
    /// The data file could not be flushed: its new chunks must not be listed (their bytes may be lost, and a
    /// second flush would not say so).
    case syncFailed(any Error)
    case commitFailed(any Error)
  }

  /// Hands the pending batch to the background queue if it is due and none is in flight. Returns true when a
  /// batch is in flight and the backlog has reached `CommitPolicy.maxBacklog`: the caller should wait for it
  /// (without the lock).
  func commitIfDue(_ state: inout State) throws -> Bool {
    let now = Date().timeIntervalSince1970
    let pendingIsEmpty = view.withLock { $0.pending.isEmpty }
    guard
      scheduler.isDue(
        uncommittedBytes: state.uncommittedBytes, pendingIsEmpty: pendingIsEmpty,
        lastCommit: state.lastCommit,
        now: now)
    else { return false }
    let handed = view.withLock { view -> (change: ManifestChange, base: Manifest)? in
      if view.commitInFlight { return nil }
      let change = view.pending
      view.pending = ManifestChange()
      view.inFlight = change
      return (change, view.manifest)
    }
    guard let handed else { return scheduler.mustWait(uncommittedBytes: state.uncommittedBytes) }
    let foregroundCommits = state.foregroundCommits
    state.uncommittedBytes = 0
    state.lastCommit = now
    // `self` is kept alive by the job: a writer is never deinitialised with a batch in flight.
    scheduler.runInBackground {
      let outcome = self.commitInBackground(handed.change, base: handed.base)
      self.state.withLock { state in
        self.adopt(outcome, of: handed.change, foregroundCommits: foregroundCommits, &state)
      }
    }
    return false
  }

  /// Flushes the data (durable mode) and commits `change`: runs on the background queue, without the lock.
  private func commitInBackground(_ change: ManifestChange, base: Manifest) -> BackgroundOutcome {
    if store.durability == .durable && (!change.added.isEmpty || !change.spans.isEmpty) {
      do {
        try mapIO { try file.handle.syncData() }
        try scheduler.syncNameOnce(store, objectID)
      } catch { return .syncFailed(error) }
    }
    do {
      return .committed(try store.commit(change, base: base, dataFile: mapIO { try file.handle }))
    } catch {
      return .commitFailed(error)
    }
  }

  private func adopt(
    _ outcome: BackgroundOutcome, of change: ManifestChange, foregroundCommits: Int, _ state: inout State
  ) {
    switch outcome {
    case .committed(let result):
      view.manifestOnDisk.store(true, ordering: .relaxed)
      if result.superseded {
        // Another writer moved the object to a new version: what this writer did since is of the old one.
        state.partial = [:]
        state.uncommittedBytes = 0
        view.withLock { view in
          view.inFlight = nil
          view.pending = ManifestChange()
          view.manifest = result.manifest
          view.commits += 1
        }
      } else {
        let current = state.foregroundCommits == foregroundCommits
        view.withLock { view in
          view.inFlight = nil
          if current {
            view.manifest = view.pending.merge(into: result.manifest, base: view.manifest).manifest
          }
          view.commits += 1
        }
      }
    case .syncFailed(let error):
      state.backgroundError = error
      view.withLock { view in
        view.inFlight = nil
        for (index, crc) in change.added where view.manifest.crc(ofChunk: index) == crc {
          view.manifest.removeChunk(index)
        }
        for span in change.spans.values.joined() { view.manifest.removeSpan(span) }
      }
      // Chunks completed since the batch was handed over may have been written before that sync started.
      forgetUnsyncedChunks(&state)
      var metadata = change
      metadata.added = [:]
      metadata.spans = [:]
      view.withLock { $0.pending.absorb(earlier: metadata) }
    case .commitFailed(let error):
      state.backgroundError = error
      let chunkSize = view.withLock { view in
        view.inFlight = nil
        view.pending.absorb(earlier: change)
        return view.manifest.chunkSize
      }
      state.uncommittedBytes += Int64(change.added.count) * Int64(chunkSize)
    }
  }

  /// After a failed fdatasync: the pages it was to flush may be lost for good (Linux marks them clean after a
  /// writeback error, and a later sync that succeeds does not say so), so the pending chunks and the parts of
  /// incomplete ones are forgotten and must be written again; the rest of the pending change is kept.
  func forgetUnsyncedChunks(_ state: inout State) {
    view.withLock { view in
      for (index, crc) in view.pending.added where view.manifest.crc(ofChunk: index) == crc {
        view.manifest.removeChunk(index)
      }
      view.pending.added = [:]
      for span in view.pending.spans.values.joined() { view.manifest.removeSpan(span) }
      view.pending.spans = [:]
    }
    state.partial = [:]
    state.uncommittedBytes = 0
  }

  /// Commits what is pending now, on the calling thread, with the lock held (no writer adds to it meanwhile;
  /// readers go on reading through the view).
  func commitLocked(_ state: inout State) throws {
    let (change, base) = view.withLock { ($0.pending, $0.manifest) }
    if change.isEmpty { return }
    if store.durability == .durable && (!change.added.isEmpty || !change.spans.isEmpty) {
      do {
        try mapIO { try file.handle.syncData() }
        try scheduler.syncNameOnce(store, objectID)
      } catch {
        forgetUnsyncedChunks(&state)
        throw error
      }
    }
    let result = try store.commit(change, base: base, dataFile: mapIO { try file.handle })
    view.manifestOnDisk.store(true, ordering: .relaxed)
    if result.superseded { state.partial = [:] }
    view.withLock { view in
      view.manifest = result.manifest
      view.pending = ManifestChange()
      view.commits += 1
    }
    state.uncommittedBytes = 0
    state.lastCommit = Date().timeIntervalSince1970
    state.foregroundCommits += 1
  }

  /// Runs `body` under the lock once no background commit is in flight.
  func withNoCommitInFlight<T>(_ body: (inout State) throws -> T) throws -> T {
    while true {
      scheduler.waitForBackground()
      let result = try state.withLock { state -> T? in
        // another writer handed over a batch meanwhile
        if view.withLock({ $0.commitInFlight }) { return nil }
        return try body(&state)
      }
      if let result { return result }
    }
  }

  /// Commits what is pending (writable), then stops: the view is closed, running reads finish, the data file is
  /// closed (releasing the in-use lock), and a data file nobody ever committed a manifest for is removed.
  func close() throws {
    try withNoCommitInFlight { state in
      if view.withLock({ $0.closed }) { return }
      var leftOrphan = false
      defer {
        view.withLock { $0.closed = true }
        // Readers count themselves under the view's lock after checking it is open: none starts now, and the
        // ones running finish their `pread` without the lock.
        while view.readsInFlight.load(ordering: .acquiring) > 0 { sched_yield() }
        let existed = file.close()
        // Nobody committed a manifest (this writer completed no chunk: its origin failed, its reader went
        // away): the data file it created would be an orphan, which `cache-fsck` reports as damage. It goes,
        // through `remove`'s protocol, unless another writer has it open or has committed since. (A file whose
        // creation was deferred and never made is not there to remove.)
        if leftOrphan && existed { removeOrphan() }
      }
      if isWritable {
        try commitLocked(&state)
        try reportBackgroundError(&state)
        leftOrphan = try mapIO { try FileSystemCalls.fileType(store.paths(for: objectID).manifest) } == nil
      }
    }
  }

  /// Removes the data file this writer made and nobody committed a manifest for. A child process that another
  /// thread of this process is starting holds the file's lock for a moment (between its `fork` and `exec` it
  /// shares the open file, and the lock is the open file's), so a removal that finds the object busy is tried
  /// again, for about 10 ms at most; a file that another writer really holds stays (that writer commits it, or
  /// removes it at its own close).
  private func removeOrphan() {
    for attempt in 1...20 {
      do {
        _ = try store.remove(objectID, keepIf: { $0 != nil })
        return
      } catch let error as StoreError where error.code == .busy && attempt < 20 {
        usleep(500)
      } catch {
        return
      }
    }
  }

  /// Commits every completed chunk now.
  func flush() throws {
    try withNoCommitInFlight { state in
      try view.withLock { try view.ensureOpen($0) }
      try reportBackgroundError(&state)
      if isWritable { try commitLocked(&state) }
    }
  }
}
