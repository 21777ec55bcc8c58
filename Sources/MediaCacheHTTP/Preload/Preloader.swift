import Logging
import MediaCache

/// Keeps the start of the items after the one being played in the cache, as a feed app needs: the app gives
/// the ordered list of items and the index being played, and updates it as the user scrolls; the next items'
/// first seconds are fetched (by `StartPlanner`: an MP4's sample tables, else an estimate), nearer items first,
/// so that swiping to one starts it from the cache.
///
/// - The policy maps the distance from the current item to a target: by default 5 s for the next item, 2 s for
///   the two after it, nothing beyond (`Policy.targets`).
/// - One item is fetched at a time, the nearest first. An item that leaves the window is cancelled at once
///   (what was fetched stays cached); when a nearer item appears, the one being fetched is stopped and taken up
///   again after it (a prefetch resumes where the cache stops).
/// - Preloading is background work: it yields to players (`CachingReader`'s background limits), does not start
///   a fetch while a player waits for an origin or did in the last half second
///   (`CachingReader.playerWaitedForOrigin(within:)`), and keeps to
///   `CachingReader.Configuration.backgroundBytesPerSecond` when one is set.
/// - `Policy.byteBudget` bounds the bytes planned for the items of the window that are not played yet: an item
///   whose plan would pass it is not fetched (`State.overBudget`) until others are played or leave.
public actor Preloader {
  /// How much of an item to preload.
  public enum Target: Sendable, Equatable {
    /// What a player reads to play this many seconds from the start.
    case seconds(Double)
    /// This many bytes from the start.
    case bytes(Int64)
  }

  /// What to preload, by distance from the item being played.
  public struct Policy: Sendable, Equatable {
    /// `targets[0]` for the next item, `targets[1]` for the one after, ...; nothing past the last.
    public var targets: [Target]
    /// The most bytes planned for the items of the window at once (default 64 MiB).
    public var byteBudget: Int64

    /// 5 s for the next item and 2 s for the two after it, within 64 MiB.
    public init(targets: [Target] = [.seconds(5), .seconds(2), .seconds(2)], byteBudget: Int64 = 64 << 20) {
      self.targets = targets
      self.byteBudget = byteBudget
    }
  }

  /// Where an item of the window stands.
  public enum State: Sendable, Equatable {
    /// Waiting for nearer items.
    case waiting
    /// Its plan is being made (box headers and `moov` read).
    case planning
    /// Its ranges are being fetched.
    case fetching
    /// Every byte of its plan is cached.
    case done
    /// Its plan would pass `Policy.byteBudget`; not fetched.
    case overBudget
    /// The plan or a fetch failed (the error's description).
    case failed(String)
  }

  /// One item of the window.
  public struct ItemStatus: Sendable, Equatable {
    /// The item's URL.
    public var url: String
    /// 1 for the next item, 2 for the one after, ...
    public var distance: Int
    /// What the policy asks for at that distance.
    public var target: Target
    /// Where it stands.
    public var state: State
    /// Bytes of its plan, once made.
    public var plannedBytes: Int64?
    /// Bytes fetched from the origin for it by this preloader.
    public var fetchedBytes: Int64
    /// The seconds of media known to be cached: the longest target in seconds whose plan was fetched whole
    /// (kept when the item comes nearer and a longer target is being fetched), 0 before any; nil for a target
    /// in bytes.
    public var cachedSeconds: Double?
  }

  private struct Job {
    var distance: Int
    var target: Target
    var state: State = .waiting
    var plan: StartPlanner.Plan?
    var fetchedBytes: Int64 = 0
    /// The longest target in seconds fetched whole.
    var doneSeconds: Double = 0
  }

  /// A player that stopped waiting for an origin less than this ago still counts as waiting.
  static let playerWaitLinger = Duration.milliseconds(500)

  private let reader: CachingReader
  private let planner: StartPlanner
  /// What to preload, by distance (`update(items:current:targets:)` may change the targets).
  public private(set) var policy: Policy
  /// Told the bytes of each piece fetched (a server's metrics).
  private let onFetched: (@Sendable (Int64) -> Void)?
  /// Where the ranges fetched are recorded, to learn whether players use them.
  public let ledger: PreloadLedger?
  private var window: [String] = []
  private var jobs: [String: Job] = [:]
  private var running: (url: String, run: Int, task: Task<Void, Never>)?
  /// Numbers the runs, so that a cancelled run that ends late does not end its successor's.
  private var runs = 0

  /// A preloader fetching through `reader` with `policy`; `planner` maps seconds to bytes (its reader should
  /// be `reader`). The ranges fetched are recorded in `ledger` when one is given.
  public init(
    reader: CachingReader, policy: Policy = Policy(), planner: StartPlanner? = nil,
    ledger: PreloadLedger? = nil, onFetched: (@Sendable (Int64) -> Void)? = nil
  ) {
    self.reader = reader
    self.ledger = ledger
    self.policy = policy
    self.planner = planner ?? StartPlanner(reader: reader)
    self.onFetched = onFetched
  }

  /// The feed is `items` (URLs, in order) and `items[current]` is being played: the items after it get their
  /// targets, nearer first; the others are not preloaded (a running fetch of one is cancelled). `targets`,
  /// when given, replaces the policy's from now on.
  public func update(items: [String], current: Int, targets: [Target]? = nil) {
    if let targets { policy.targets = targets }
    var next: [String] = []
    var retargeted: Set<String> = []
    for (offset, url) in items.dropFirst(max(0, current + 1)).prefix(policy.targets.count).enumerated()
    where !next.contains(url) && url != items[safe: current] {
      next.append(url)
      let distance = offset + 1
      let target = policy.targets[offset]
      if var job = jobs[url] {
        if job.target != target, job.state != .done || !covers(job.target, target) {
          job.state = .waiting
          job.plan = nil
          retargeted.insert(url)
        }
        job.distance = distance
        job.target = target
        if job.state == .overBudget { job.state = .waiting }
        jobs[url] = job
      } else {
        jobs[url] = Job(distance: distance, target: target)
      }
    }
    for url in jobs.keys where !next.contains(url) { jobs[url] = nil }
    window = next
    if let running {
      let nearer = jobs.values.contains {
        $0.state == .waiting && $0.distance < (jobs[running.url]?.distance ?? 0)
      }
      // A running item with a new target starts again with a new plan (the cache keeps what it fetched).
      if jobs[running.url] == nil || nearer || retargeted.contains(running.url) {
        running.task.cancel()
        if jobs[running.url] != nil { jobs[running.url]!.state = .waiting }
        self.running = nil
      }
    }
    startNext()
  }

  /// The items of the window, nearest first.
  public func status() -> [ItemStatus] {
    window.compactMap { url in
      jobs[url].map {
        ItemStatus(
          url: url, distance: $0.distance, target: $0.target, state: $0.state,
          plannedBytes: $0.plan?.byteCount, fetchedBytes: $0.fetchedBytes,
          cachedSeconds: $0.target.isSeconds ? $0.doneSeconds : nil)
      }
    }
  }

  /// Cancels everything (what was fetched stays cached).
  public func stop() {
    running?.task.cancel()
    running = nil
    jobs = [:]
    window = []
  }

  /// Cancels everything, as `stop`, and returns once the fetch that was running has ended (before a process
  /// exits: `CachingReader.finishOpenObjects` then closes what it fetched).
  public func stopAndWait() async {
    let task = running?.task
    stop()
    await task?.value
  }

  /// Waits until no item is waiting or being fetched (for tests and one-shot preloads).
  public func waitUntilIdle() async {
    while let task = running?.task { await task.value }
  }

  /// Whether what `old` fetched holds `new`.
  private func covers(_ old: Target, _ new: Target) -> Bool {
    switch (old, new) {
    case (.seconds(let a), .seconds(let b)): a >= b
    case (.bytes(let a), .bytes(let b)): a >= b
    default: false
    }
  }

  private func startNext() {
    guard running == nil else { return }
    let next = window.first { jobs[$0]?.state == .waiting }
    guard let url = next, let job = jobs[url] else { return }
    jobs[url]!.state = .planning
    runs += 1
    let run = runs
    let task = Task { await self.run(url, target: job.target, number: run) }
    running = (url, run, task)
  }

  /// Plans and fetches `url`, updating its job while it is still in the window.
  private func run(_ url: String, target: Target, number: Int) async {
    defer { finish(number) }
    do {
      let plan: StartPlanner.Plan
      if let made = jobs[url]?.plan {
        plan = made
      } else {
        // What planning fetched (box headers, a `moov` at the tail, playlists) is preloaded too.
        let before = await cachedRanges(url)
        plan = try await makePlan(url, target)
        guard jobs[url] != nil, !Task.isCancelled else { return }
        jobs[url]!.plan = plan
        let probed = await cachedRanges(url).subtracting(before)
        if !probed.isEmpty {
          onFetched?(probed.count)
          ledger?.recordPreloaded(reader.cache.objectID(for: url), probed.ranges)
        }
        // An actor suspends at each `await`: the item may have left the window meanwhile.
        guard jobs[url] != nil, !Task.isCancelled else { return }
        jobs[url]!.fetchedBytes += probed.count
      }
      // The other items' bytes: their plans' ranges, or what they fetched (whole objects).
      let others = jobs.filter { $0.key != url }.values.reduce(Int64(0)) { sum, job in
        [.planning, .fetching, .done].contains(job.state)
          ? sum + max(job.plan?.byteCount ?? 0, job.fetchedBytes) : sum
      }
      jobs[url]!.state = .fetching
      for part in plan.parts {
        // Whole objects (HLS) are counted as they come: the budget is checked before each.
        let mine = max(plan.byteCount, jobs[url]?.fetchedBytes ?? 0)
        if others + mine > policy.byteBudget {
          if jobs[url] != nil { jobs[url]!.state = .overBudget }
          return
        }
        for range in part.requests {
          // A player waiting for an origin goes first: the next fetch waits until none is.
          while reader.playerWaitedForOrigin(within: Self.playerWaitLinger) {
            try await Task.sleep(for: .milliseconds(50))
          }
          var fetched: Int64 = 0
          let id = ledger.map { _ in reader.cache.objectID(for: part.url) }
          for try await progress in reader.prefetch(part.url, range: range) {
            let more = max(0, progress.fetchedBytes - fetched)
            fetched += more
            if jobs[url] != nil { jobs[url]!.fetchedBytes += more }
            if more > 0 { onFetched?(more) }
            if let ledger, let id, !progress.fetchedRanges.isEmpty {
              ledger.recordPreloaded(id, progress.fetchedRanges)
            }
          }
          try Task.checkCancellation()
        }
      }
      if jobs[url] != nil {
        jobs[url]!.state = .done
        if case .seconds(let seconds) = target {
          jobs[url]!.doneSeconds = max(jobs[url]!.doneSeconds, seconds)
        }
      }
    } catch {
      if !Task.isCancelled, jobs[url] != nil { jobs[url]!.state = .failed("\(error)") }
    }
  }

  /// The bytes of `url`'s object committed to the cache (empty if it cannot be read).
  private func cachedRanges(_ url: String) async -> ByteRangeSet {
    switch try? await reader.cache.status(for: url) {
    case .partial(_, _, let ranges): ByteRangeSet(ranges)
    case .complete(let length): ByteRangeSet([0..<length])
    case .some(.none), nil: ByteRangeSet()
    }
  }

  private func makePlan(_ url: String, _ target: Target) async throws -> StartPlanner.Plan {
    switch target {
    case .seconds(let seconds):
      return try await planner.plan(url, seconds: seconds)
    case .bytes(let count):
      return StartPlanner.Plan(
        url: url, parts: [.init(url: url, ranges: count > 0 ? [0..<count] : [])],
        source: .estimate(reason: "a target in bytes"))
    }
  }

  /// Run `number` ended (or was cancelled): the next item starts.
  private func finish(_ number: Int) {
    if running?.run == number { running = nil }
    startNext()
  }
}

extension Array {
  fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}

extension Preloader.Target {
  fileprivate var isSeconds: Bool {
    if case .seconds = self { return true }
    return false
  }
}
