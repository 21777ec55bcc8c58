import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

@testable import MediaCache

/// Power loss at random points (`PowerLossSimulator`), then the tree is opened afresh and checked:
/// - durable: every chunk a manifest lists has its CRC and the source's bytes, and nothing that was committed
///   when a `flush()`/`close()`/`store` returned is missing;
/// - relaxed: chunks may be missing, but none listed is served wrong (a read gives the source's bytes or
///   `corruptChunk`), and `CacheChecker` with repair leaves a tree that checks clean.
///
/// `MEDIACACHE_TORTURE_TRIALS` (default 50 per test) and `MEDIACACHE_TORTURE_SEED` choose the run; each trial's
/// seed is printed with any failure, and `MEDIACACHE_TORTURE_REPORT=1` prints the totals.
/// `MEDIACACHE_TORTURE_SPAWN=<n>` has n threads spawn child processes meanwhile, as other suites do in a full
/// `swift test` (see `waitForChildrenToLetGo`).
extension FaultTests {
  @Suite struct PowerLoss {
    @Test func managerWritesWithBackgroundCommits() async throws {
      let totals = try await PowerLossHarness.run(kind: .manager, trials: tortureTrials(default: 50))
      #expect(totals.failures.isEmpty, "\(totals.failures.prefix(5).joined(separator: "\n"))")
    }

    @Test func facadeStoresAndCompaction() async throws {
      let totals = try await PowerLossHarness.run(kind: .facade, trials: tortureTrials(default: 30))
      #expect(totals.failures.isEmpty, "\(totals.failures.prefix(5).joined(separator: "\n"))")
    }
  }
}

/// Figures of one randomized run.
struct TortureTotals: Sendable {
  var trials = 0
  var crashes = 0
  var faultsInjected = 0
  var writesRecorded = 0
  var changesDropped = 0
  var changesGarbled = 0
  var namesUndone = 0
  var bytesVerified: Int64 = 0
  var chunksVerified = 0
  var corruptChunksDetected = 0
  var failures: [String] = []
  var duration: Double = 0

  var summary: String {
    "trials \(trials), crashes \(crashes), injected fsync failures \(faultsInjected), writes recorded "
      + "\(writesRecorded), volatile changes dropped \(changesDropped) / garbled \(changesGarbled), names undone "
      + "\(namesUndone), chunks verified \(chunksVerified) (\(bytesVerified) bytes), corrupt chunks detected "
      + "\(corruptChunksDetected), failures \(failures.count), \(String(format: "%.1f", duration)) s"
  }
}

enum PowerLossHarness {
  enum Kind: String { case manager, facade }

  static let chunk = 4096

  static func run(kind: Kind, trials: Int) async throws -> TortureTotals {
    var totals = TortureTotals()
    let started = Date()
    var rng = SeededRandom(seed: tortureSeed() ^ (kind == .manager ? 1 : 2))
    var maxCalls = 150
    var maxSyncs = 20
    let spawner = ChildSpawner(
      threads: ProcessInfo.processInfo.environment["MEDIACACHE_TORTURE_SPAWN"].flatMap { Int($0) } ?? 0)
    defer { spawner?.stop() }
    // MEDIACACHE_TORTURE_REPLAY="<seed> <maxCalls> <maxSyncs>" runs just that trial (a failure prints it).
    let replay = ProcessInfo.processInfo.environment["MEDIACACHE_TORTURE_REPLAY"].map {
      $0.split(separator: " ").compactMap { UInt64($0) }
    }
    for trial in 0..<(replay?.count == 3 ? 1 : trials) {
      var seed = rng.next()
      if let replay, replay.count == 3 {
        (seed, maxCalls, maxSyncs) = (replay[0], Int(replay[1]), Int(replay[2]))
      }
      let replayed = "MEDIACACHE_TORTURE_REPLAY=\"\(seed) \(maxCalls) \(maxSyncs)\""
      let outcome = try await runTrial(kind: kind, seed: seed, maxCalls: maxCalls, maxSyncs: maxSyncs)
      maxCalls = max(maxCalls, outcome.calls)
      maxSyncs = max(maxSyncs, outcome.syncs)
      totals.trials += 1
      if outcome.crashed { totals.crashes += 1 }
      totals.faultsInjected += outcome.syncFailures
      totals.writesRecorded += outcome.writes
      totals.changesDropped += outcome.damage.changesDropped
      totals.changesGarbled += outcome.damage.changesGarbled
      totals.namesUndone += outcome.damage.namesUndone
      totals.bytesVerified += outcome.bytesVerified
      totals.chunksVerified += outcome.chunksVerified
      totals.corruptChunksDetected += outcome.corruptDetected
      totals.failures += outcome.failures.map {
        "\(kind) trial \(trial) \(replayed) [\(outcome.setting)]: \($0)"
      }
    }
    totals.duration = Date().timeIntervalSince(started)
    if ProcessInfo.processInfo.environment["MEDIACACHE_TORTURE_REPORT"] != nil {
      print("power loss (\(kind)): \(totals.summary)")
    }
    return totals
  }

  struct TrialOutcome {
    var setting = ""
    var crashed = false
    var calls = 0
    var syncs = 0
    var writes = 0
    var syncFailures = 0
    var damage = PowerLossSimulator.Damage()
    var bytesVerified: Int64 = 0
    var chunksVerified = 0
    var corruptDetected = 0
    var failures: [String] = []
  }

  /// One object of a trial: its bytes, and which chunks (by index) were promised durable.
  struct Object {
    var key: String
    var id: ObjectID
    var data: Data
    var knownLength: Bool
    var promised: Set<Int> = []
    var mayBeEvicted = false
    var pinned = false
  }

  static func runTrial(kind: Kind, seed: UInt64, maxCalls: Int, maxSyncs: Int) async throws -> TrialOutcome {
    var rng = SeededRandom(seed: seed)
    let durability: Durability = Bool.random(using: &rng) ? .durable : .relaxed
    let crashPoint: PowerLossSimulator.CrashPoint
    switch Int.random(in: 0..<10, using: &rng) {
    case 0..<5: crashPoint = .call(Int.random(in: 1...maxCalls, using: &rng))
    case 5..<9: crashPoint = .sync(Int.random(in: 1...maxSyncs, using: &rng))
    default: crashPoint = .never
    }
    // The manager workload writes again after an error; the facade one does not, so it gets no injected fault.
    let failDataSync =
      kind == .manager && Int.random(in: 0..<4, using: &rng) == 0 ? Int.random(in: 1...4, using: &rng) : nil
    let policy = PowerLossSimulator.DataPolicy.allCases.randomElement(using: &rng)!
    let undo = [0, 0.5, 1].randomElement(using: &rng)!
    var outcome = TrialOutcome()
    outcome.setting =
      "\(durability), crash at \(crashPoint), fail data sync \(failDataSync.map(String.init) ?? "-"), "
      + "data \(policy), undo names \(undo)"

    return try await withTemporaryDirectory { directory in
      let root = "\(directory)/cache"
      let stash = "\(directory)/stash"
      try FileManager.default.createDirectory(atPath: stash, withIntermediateDirectories: true)
      let store = try ShardedStore(root: root, chunkSize: chunk, durability: durability)
      var cache: MediaCache?
      if kind == .facade {
        cache = try MediaCache(
          configuration: MediaCache.Configuration(
            directory: FilePath(root), chunkSize: chunk, memoryCostLimit: 0, durability: durability,
            commitPolicy: .init(
              bytes: Int64(chunk * 2), interval: .seconds(100), maxBacklog: Int64(chunk * 4)),
            maxSize: nil, maxAge: nil))
      }
      var objects = (0..<Int.random(in: 1...3, using: &rng)).map { index in
        let key = "https://origin.example/\(seed)/\(index)"
        let length = Int.random(in: 1...(10 * chunk), using: &rng)
        return Object(
          key: key, id: ObjectID(CacheKey(key)),
          data: randomBytes(count: length, seed: seed &+ UInt64(index)),
          knownLength: Int.random(in: 0..<4, using: &rng) != 0)
      }
      let simulator = PowerLossSimulator(
        root: root, stash: stash, crashPoint: crashPoint, failDataSync: failDataSync)
      IOFaults.install(simulator)
      do {
        switch kind {
        case .manager:
          try await managerWorkload(
            store: store, objects: &objects, rng: &rng, crashed: { simulator.crashed.0 })
        case .facade: try await facadeWorkload(cache: cache!, objects: &objects, rng: &rng)
        }
      } catch {
        let (crashed, _) = simulator.crashed
        if !crashed { outcome.failures.append("workload failed without a crash: \(error)") }
      }
      (outcome.crashed, _) = simulator.crashed
      simulator.crashNow()
      IOFaults.install(nil)
      (outcome.calls, outcome.syncs) = simulator.callsSeen
      (outcome.writes, outcome.syncFailures) = simulator.statistics
      outcome.damage = simulator.losePower(data: policy, undoNames: undo, using: &rng)
      VerifiedChunkCache.shared.removeAll()
      verify(root: root, durability: durability, objects: objects, &outcome)
      return outcome
    }
  }

  // MARK: Workloads

  /// Writes every object through its own manager, pieces in random order, with background commits, random
  /// flushes and reopenings. Promises what a successful `flush`/`close` committed. An error that is not the
  /// crash (an injected fsync failure) makes it close the manager, reopen it and write everything again.
  static func managerWorkload(
    store: ShardedStore, objects: inout [Object], rng: inout SeededRandom, crashed: () -> Bool
  ) async throws {
    let policy = FileHandleAssetDataManager.CommitPolicy(
      bytes: Int64(chunk * Int.random(in: 1...3, using: &rng)),
      interval: .seconds(Bool.random(using: &rng) ? 0 : 100), maxBacklog: Int64(chunk * 4))
    var managers: [FileHandleAssetDataManager?] = objects.map { _ in nil }
    defer { for manager in managers { try? manager?.close() } }
    func open(_ index: Int) throws -> FileHandleAssetDataManager {
      if let manager = managers[index] { return manager }
      let manager = try FileHandleAssetDataManager(store: store, id: objects[index].id, commitPolicy: policy)
      if objects[index].knownLength { try manager.setContentLength(Int64(objects[index].data.count)) }
      managers[index] = manager
      return manager
    }
    func promise(_ index: Int, _ manager: FileHandleAssetDataManager) {
      objects[index].promised.formUnion(manager.manifest.chunkCRCs.keys)
    }
    var plan: [(object: Int, range: Range<Int>)] = []
    func pieces(of index: Int) -> [(object: Int, range: Range<Int>)] {
      var result: [(object: Int, range: Range<Int>)] = []
      let data = objects[index].data
      for start in stride(from: 0, to: data.count, by: chunk) {
        let end = min(data.count, start + chunk)
        if end - start > 2 && Int.random(in: 0..<3, using: &rng) == 0 {
          let split = Int.random(in: (start + 1)..<end, using: &rng)
          result += [(index, start..<split), (index, split..<end)]
        } else {
          result.append((index, start..<end))
        }
      }
      return result
    }
    for index in objects.indices { plan += pieces(of: index) }
    plan.shuffle(using: &rng)
    var step = 0
    var retries = 0
    while step < plan.count {
      let (index, range) = plan[step]
      step += 1
      do {
        let manager = try open(index)
        let data = objects[index].data
        try manager.write(data[range], at: Int64(range.lowerBound))
        switch Int.random(in: 0..<20, using: &rng) {
        case 0:
          try manager.flush()
          promise(index, manager)
        case 1:
          managers[index] = nil
          try manager.close()
          promise(index, manager)
        case 2 where index == 0:
          try manager.setPinned(true)
        default: break
        }
      } catch {
        // Not the crash (the caller tells): give up this manager and write the object again.
        guard !crashed(), retries < 4 else { throw error }
        retries += 1
        try? managers[index]?.close()
        managers[index] = nil
        plan += pieces(of: index)
      }
    }
    for index in objects.indices {
      var attempt = 0
      while true {
        do {
          let manager = try open(index)
          let data = objects[index].data
          if attempt > 0 {
            for (_, range) in pieces(of: index) {
              try manager.write(data[range], at: Int64(range.lowerBound))
            }
          }
          if !objects[index].knownLength { try manager.setContentLength(Int64(data.count)) }
          managers[index] = nil
          try manager.close()
          promise(index, manager)
          break
        } catch {
          guard !crashed(), attempt < 3 else { throw error }
          attempt += 1
          try? managers[index]?.close()
          managers[index] = nil
        }
      }
    }
  }

  /// Whole objects through `MediaCache.store`, range writes through `assetDataManager`, pinning, and compaction
  /// passes (size limit, scrub) between them.
  static func facadeWorkload(
    cache: MediaCache, objects: inout [Object], rng: inout SeededRandom
  ) async throws {
    for index in objects.indices {
      let object = objects[index]
      if Bool.random(using: &rng) {
        try await cache.store(object.data, for: object.key, policy: .diskOnly)
      } else {
        let manager = try cache.assetDataManager(for: object.key)
        do {
          try manager.setContentLength(Int64(object.data.count))
          for start in stride(from: 0, to: object.data.count, by: chunk).shuffled(using: &rng) {
            try manager.write(object.data[start..<min(object.data.count, start + chunk)], at: Int64(start))
          }
          try manager.close()
        } catch {
          try? manager.close()
          throw error
        }
      }
      objects[index].promised = Set(0..<((object.data.count + chunk - 1) / chunk))
      if index == 0 && Bool.random(using: &rng) {
        try await cache.pin(object.key)
        objects[index].pinned = true
      }
      if Int.random(in: 0..<3, using: &rng) == 0 {
        // Whatever is not pinned may go; a pass cut short by the crash may have removed any of it.
        for other in objects.indices where !objects[other].pinned { objects[other].mayBeEvicted = true }
        let compactor = Compactor(
          store: cache.store,
          policy: CompactionPolicy(
            maxSize: Int64(Int.random(in: 0...(20 * chunk), using: &rng)), lowWatermark: 0.8, maxAge: nil,
            scrubBudget: Int64(8 * chunk)))
        let report = try compactor.runPass()
        if !report.errors.isEmpty { throw StoreError.invalidConfiguration(report.errors.joined()) }
      }
    }
  }

  // MARK: Checking the tree after power loss

  static func verify(root: String, durability: Durability, objects: [Object], _ outcome: inout TrialOutcome) {
    let store: ShardedStore
    do {
      store = try ShardedStore(root: root, chunkSize: chunk, durability: durability)
    } catch {
      outcome.failures.append("the cache does not open after power loss: \(error)")
      return
    }
    for object in objects {
      let evictable = object.mayBeEvicted ? " (a removal may have been cut short)" : ""
      let manifest: Manifest?
      do {
        manifest = try store.readManifest(object.id)
      } catch let error as StoreError where error.code == .corruptManifest {
        if durability == .durable {
          outcome.failures.append("\(object.key): durable manifest corrupt: \(error)")
        }
        manifest = nil
      } catch {
        outcome.failures.append("\(object.key): manifest unreadable: \(error)")
        continue
      }
      let listed = manifest?.chunkCRCs ?? [:]
      if durability == .durable && !object.mayBeEvicted {
        let lost = object.promised.subtracting(listed.keys)
        if !lost.isEmpty { outcome.failures.append("\(object.key): promised chunks lost: \(lost.sorted())") }
      }
      guard let manifest else { continue }
      let dataPath = store.paths(for: object.id).data
      let onDisk = try? fileBytes(dataPath)
      for (index, crc) in listed.sorted(by: { $0.key < $1.key }) {
        let range = manifest.byteRange(ofChunk: index)
        guard range.upperBound <= Int64(object.data.count) else {
          outcome.failures.append("\(object.key): lists chunk \(index) past the source's end")
          continue
        }
        let source = object.data[Int(range.lowerBound)..<Int(range.upperBound)]
        if crc != CRC32.checksum(source) {
          outcome.failures.append("\(object.key): chunk \(index) listed with a CRC of other bytes")
          continue
        }
        if durability == .durable {
          let bytes = onDisk.flatMap {
            $0.count >= Int(range.upperBound) ? Data($0[Int(range.lowerBound)..<Int(range.upperBound)]) : nil
          }
          if bytes != Data(source) {
            outcome.failures.append(
              "\(object.key): durable chunk \(index) has wrong bytes on disk\(evictable)")
          }
        }
      }
      // Reads through the library: right bytes, or (relaxed) corruptChunk.
      do {
        let reader = try FileHandleAssetDataManager(store: store, id: object.id, writable: false)
        defer { try? reader.close() }
        for index in listed.keys.sorted() {
          let range = manifest.byteRange(ofChunk: index)
          do {
            let bytes = try reader.read(range)
            if bytes != object.data[Int(range.lowerBound)..<Int(range.upperBound)] {
              outcome.failures.append("\(object.key): chunk \(index) SERVED WRONG")
            } else {
              outcome.chunksVerified += 1
              outcome.bytesVerified += Int64(bytes.count)
            }
          } catch let error as StoreError where error.code == .corruptChunk {
            outcome.corruptDetected += 1
            if durability == .durable {
              outcome.failures.append("\(object.key): durable chunk \(index) corrupt")
            }
          }
        }
      } catch let error as StoreError where error.code == .notFound {
        if !listed.isEmpty && durability == .durable {
          outcome.failures.append("\(object.key): listed chunks but no data file\(evictable)")
        }
      } catch {
        outcome.failures.append("\(object.key): read failed: \(error)")
      }
    }
    // fsck: repair, then a second check must be clean.
    do {
      let trialDirectory = parentDirectory(of: root)
      waitForChildrenToLetGo(of: trialDirectory, &outcome)
      let repair = try CacheChecker(root: FilePath(root), options: .init(repair: true)).run()
      // Nothing may have the objects open now: a busy object is not repaired, and the re-check would report
      // what repair skipped rather than what it failed to fix.
      if repair.totals.busy > 0 {
        outcome.failures.append("fsck repair found \(repair.totals.busy) objects busy (open in some process)")
      }
      waitForChildrenToLetGo(of: trialDirectory, &outcome)
      let second = try CacheChecker(root: FilePath(root)).run()
      let errors = second.findings.filter { $0.severity == .error }
      if !errors.isEmpty {
        outcome.failures.append("fsck after repair: \(errors.map { "\($0.kind) \($0.path)" })")
      }
    } catch {
      outcome.failures.append("fsck could not run: \(error)")
    }
  }

  /// Waits until no child of this process has a file under `directory` open; records a failure naming the
  /// holders if one still does after `timeout`.
  ///
  /// Other suites spawn children meanwhile (Foundation's `Process`, swift-testing's exit tests). On Linux
  /// `posix_spawn` clones this process, descriptor table included (close-on-exec descriptors too), and the
  /// child keeps that copy until its `exec`; a copy refers to the same open file description, so it holds that
  /// description's `flock`. A data file the workload or `verify`'s reader closed a moment ago can so still be
  /// locked by a child that a loaded machine has not yet let reach its `exec`, and the checker's repair skips
  /// the object as busy (seen in a full `swift test`: "fsck repair found 1 objects busy", then the re-check
  /// reports what repair skipped). Nothing in this process has the trial's files open here, so no child spawned
  /// from now on gets one: the wait ends once the children spawned before have exec'd or exited, normally
  /// within milliseconds. A holder left after `timeout` keeps the descriptor across `exec` or lives on without
  /// one: a real leak, which fails the trial.
  static func waitForChildrenToLetGo(
    of directory: String, _ outcome: inout TrialOutcome, timeout: Duration = .seconds(30)
  ) {
    #if os(Linux)
      let clock = ContinuousClock()
      let deadline = clock.now + timeout
      var holders = childDescriptors(under: directory)
      while !holders.isEmpty && clock.now < deadline {
        usleep(1000)  // no event tells another process's exec: look again
        holders = childDescriptors(under: directory)
      }
      if !holders.isEmpty {
        outcome.failures.append("child processes still hold the trial's files after \(timeout): \(holders)")
      }
    #endif
  }

  #if os(Linux)
    /// The descriptors of this process's children that refer to files under `directory` ("pid 12 fd 40 ->
    /// path"), from `/proc`.
    static func childDescriptors(under directory: String) -> [String] {
      let me = getpid()
      var found: [String] = []
      for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let pid = Int32(entry), pid != me,
          let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let commandEnd = stat.lastIndex(of: ")")
        else { continue }
        // After "pid (command) ": the state, then the parent's pid.
        let fields = stat[stat.index(after: commandEnd)...].split(separator: " ")
        guard fields.count > 1, Int32(fields[1]) == me else { continue }
        for descriptor in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? [] {
          let link = "/proc/\(pid)/fd/\(descriptor)"
          guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link),
            target.hasPrefix(directory + "/")
          else { continue }
          found.append("pid \(pid) fd \(descriptor) -> \(target)")
        }
      }
      return found
    }
  #endif
}

/// Spawns short-lived children (`/bin/true`, through Foundation's `Process`) on `threads` threads until
/// stopped: what other suites do during a full `swift test`, here on demand (`MEDIACACHE_TORTURE_SPAWN`).
final class ChildSpawner: Sendable {
  private let stopping = Atomic<Bool>(false)
  private let running = DispatchGroup()

  init?(threads: Int) {
    guard threads > 0 else { return nil }
    for _ in 0..<threads {
      running.enter()
      Thread.detachNewThread { [self] in
        while !stopping.load(ordering: .relaxed) {
          let child = Process()
          child.executableURL = URL(fileURLWithPath: "/bin/true")
          guard (try? spawningAlone { try child.run() }) != nil else { break }
          child.waitUntilExit()
        }
        running.leave()
      }
    }
  }

  /// Stops spawning and waits for the last children.
  func stop() {
    stopping.store(true, ordering: .relaxed)
    running.wait()
  }
}

extension FaultTests.PowerLoss {
  /// Found by `managerWritesWithBackgroundCommits` (seed 18149459466069872521): a new object's data file is
  /// linked into its shard directory, and that directory was first fsynced only after the first manifest was
  /// renamed in. Power lost at that fsync could keep the manifest's name and lose the data file's: a durable
  /// manifest listing chunks of a file that is not there.
  @Test func durableManifestNeverOutlivesItsDataFileName() async throws {
    try await withTemporaryDirectory { directory in
      let root = "\(directory)/cache"
      let stash = "\(directory)/stash"
      try FileManager.default.createDirectory(atPath: stash, withIntermediateDirectories: true)
      let store = try ShardedStore(root: root, chunkSize: 4096, durability: .durable)
      let id = ObjectID(CacheKey("https://origin.example/linked"))
      let data = randomBytes(count: 2 * 4096, seed: 7)
      let simulator = PowerLossSimulator(root: root, stash: stash, crashPoint: .directorySyncAfterRename)
      await withIOFaultHandler(simulator) {
        let manager = try? FileHandleAssetDataManager(store: store, id: id)
        try? manager?.setContentLength(Int64(data.count))
        try? manager?.write(data, at: 0)
        try? manager?.close()
      }
      #expect(simulator.crashed.0)
      var rng = SeededRandom(seed: 1)
      _ = simulator.losePower(
        data: .drop, undoNames: 1, onlyNamesMatching: { $0.hasSuffix(".data") }, using: &rng)
      let manifest = try store.readManifest(id)
      if let manifest, !manifest.chunkCRCs.isEmpty {
        #expect(
          try FileSystemCalls.status(store.paths(for: id).data) != nil, "manifest lists chunks, no data file")
      }
    }
  }
}

extension FaultTests.PowerLoss {
  /// Found by `facadeStoresAndCompaction` (2 of 2000 trials, e.g. MEDIACACHE_TORTURE_REPLAY="13584002783479152957
  /// 159 36"): `ShardedStore.remove` unlinks the manifest, then the data file, with no directory fsync between
  /// them. If the second unlink reaches the disk and the first does not (allowed by POSIX, not by a journaling
  /// file system that keeps metadata in order), power loss leaves a manifest listing chunks of a data file that
  /// is gone. Readers see a miss and never wrong bytes, and fsck removes the manifest, but invariant 2 is broken.
  /// Fixed: in the durable mode the directory is fsynced between the unlinks (one fsync per eviction).
  @Test func interruptedRemovalNeverLeavesAManifestWithoutData() async throws {
    try await withTemporaryDirectory { directory in
      let root = "\(directory)/cache"
      let stash = "\(directory)/stash"
      try FileManager.default.createDirectory(atPath: stash, withIntermediateDirectories: true)
      let store = try ShardedStore(root: root, chunkSize: 4096, durability: .durable)
      let id = ObjectID(CacheKey("https://origin.example/removed"))
      let manager = try FileHandleAssetDataManager(store: store, id: id)
      try manager.setContentLength(4096)
      try manager.write(randomBytes(count: 4096, seed: 9), at: 0)
      try manager.close()
      // A child another suite spawns meanwhile may still hold a copy of the closed data file's descriptor, and
      // so its lock, until its exec (see `waitForChildrenToLetGo`): the remove would find the object busy.
      var outcome = PowerLossHarness.TrialOutcome()
      PowerLossHarness.waitForChildrenToLetGo(of: root, &outcome)
      #expect(outcome.failures.isEmpty, "\(outcome.failures)")
      let simulator = PowerLossSimulator(root: root, stash: stash, crashPoint: .never)
      try await withIOFaultHandler(simulator) { _ = try store.remove(id) }
      var rng = SeededRandom(seed: 1)
      _ = simulator.losePower(
        data: .keep, undoNames: 1, onlyNamesMatching: { !$0.hasSuffix(".data") }, using: &rng)
      let listed = try store.readManifest(id)?.chunkCRCs ?? [:]
      let dataExists = try FileSystemCalls.status(store.paths(for: id).data) != nil
      #expect(listed.isEmpty || dataExists, "a manifest outlived its data file")
    }
  }
}
