/// The limits a compaction pass enforces.
public struct CompactionPolicy: Sendable, Equatable {
  /// Evict least recently used objects while the bytes on disk exceed this (nil: no size limit).
  public var maxSize: Int64?
  /// Once over `maxSize`, evict down to this share of it, so passes do not run back to back (default 0.9).
  public var lowWatermark: Double
  /// Evict objects not accessed for longer than this (nil: no age limit; default 90 days).
  public var maxAge: Duration?
  /// Keep at least this many bytes free on the cache's file system, evicting as if over `maxSize`.
  public var minFree: Int64?
  /// When the size or free-space limit must free bytes, first cut idle objects (least recently used first)
  /// down to what this window keeps (their first bytes, or the ranges its planner finds a player starts with,
  /// in whole chunks), and evict whole objects only if that is not enough: a partly watched or preloaded video
  /// keeps its start. nil (the library's default): whole objects only. The command-line tools default to
  /// `HeadWindow.mediaStart(seconds: 5)`, the preload target of the next item. Age eviction always takes whole
  /// objects.
  public var keepHeads: HeadWindow?
  /// Files in `tmp/` older than this are reaped (default 1 hour); younger ones may be live.
  public var tmpGracePeriod: Duration
  /// Verify the CRCs of up to this many bytes of chunks per pass, continuing across passes (0: no scrub).
  public var scrubBudget: Int64
  /// Stop a pass after this long; the next pass continues (default 60 seconds).
  public var maxPassDuration: Duration
  /// Decide and report, change nothing.
  public var dryRun: Bool

  /// A policy with the given limits. The defaults evict by age only (90 days), reap `tmp/` files older than
  /// an hour, scrub nothing and stop a pass after 60 seconds. Sizes are bytes.
  public init(
    maxSize: Int64? = nil, lowWatermark: Double = 0.9, maxAge: Duration? = .seconds(90 * 86400),
    minFree: Int64? = nil, keepHeads: HeadWindow? = nil, tmpGracePeriod: Duration = .seconds(3600),
    scrubBudget: Int64 = 0,
    maxPassDuration: Duration = .seconds(60), dryRun: Bool = false
  ) {
    self.maxSize = maxSize
    self.lowWatermark = lowWatermark
    self.maxAge = maxAge
    self.minFree = minFree
    self.keepHeads = keepHeads
    self.tmpGracePeriod = tmpGracePeriod
    self.scrubBudget = scrubBudget
    self.maxPassDuration = maxPassDuration
    self.dryRun = dryRun
  }
}

/// What one compaction pass did (or, in a dry run, would do).
public struct CompactionReport: Sendable, Equatable {
  /// Objects found by the walk.
  public var objectsScanned = 0
  /// Bytes on disk before the pass.
  public var bytesBefore: Int64 = 0
  /// Bytes on disk after the pass.
  public var bytesAfter: Int64 = 0
  /// Objects evicted, by reason.
  public var evicted: [RemovalReason: Int] = [:]
  /// Bytes freed by evictions and orphan removals.
  public var bytesFreed: Int64 = 0
  /// The objects evicted.
  public var removed: [RemovedObject] = []
  /// The objects whose tails were cut (`CompactionPolicy.keepHeads`); their bytes freed are in `bytesFreed`.
  public var trimmed: [TrimmedObject] = []
  /// Candidates skipped because a process had them open.
  public var skippedBusy = 0
  /// Candidates kept because they are pinned.
  public var pinnedKept = 0
  /// Candidates kept because the app's `shouldEvict` said no.
  public var vetoed = 0
  /// Stale files removed from `tmp/`.
  public var tmpReaped = 0
  /// Data files without a manifest (a removal cut short, a writer dead before its first commit) removed.
  public var orphansRemoved = 0
  /// Chunks whose CRC was checked by the scrub.
  public var chunksScrubbed = 0
  /// Bytes read by the scrub.
  public var bytesScrubbed: Int64 = 0
  /// Chunks dropped because they failed their CRC.
  public var chunksDropped = 0
  /// Per object, the chunks dropped.
  public var droppedChunks: [ObjectID: [Int]] = [:]
  /// The pass stopped early (time limit or cancellation); the next pass continues.
  public var incomplete = false
  /// How long the pass took (in the JSON: seconds).
  public var duration: Duration = .zero
  /// Whether this was a dry run.
  public var dryRun = false
  /// Objects that failed (with the reason); the pass went on without them.
  public var errors: [String] = []

  /// Objects evicted, all reasons.
  public var evictedCount: Int { evicted.values.reduce(0, +) }
}

/// The compaction report's JSON (`mediacache purge --json`, `cache-compactor --json`; see docs/REPORTS.md):
/// one key per field, named as the field, plus `evictedCount`. `evicted` lists every reason, 0 when none was
/// evicted for it; decoding drops the zeros again, so a report survives the round trip unchanged.
extension CompactionReport: Codable {
  private enum CodingKeys: String, CodingKey {
    case objectsScanned, bytesBefore, bytesAfter, evicted, evictedCount, bytesFreed, removed, trimmed,
      skippedBusy
    case pinnedKept, vetoed, tmpReaped, orphansRemoved, chunksScrubbed, bytesScrubbed, chunksDropped
    case droppedChunks, incomplete, duration, dryRun, errors
  }

  /// Decodes a report from its JSON; `evictedCount` is read from `evicted`, not from its own key. Throws
  /// `DecodingError` when any key but `evictedCount` and `trimmed` is missing, or any is of the wrong type.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.init()
    objectsScanned = try container.decode(Int.self, forKey: .objectsScanned)
    bytesBefore = try container.decode(Int64.self, forKey: .bytesBefore)
    bytesAfter = try container.decode(Int64.self, forKey: .bytesAfter)
    evicted = try container.decode([RemovalReason: Int].self, forKey: .evicted).filter { $0.value != 0 }
    bytesFreed = try container.decode(Int64.self, forKey: .bytesFreed)
    removed = try container.decode([RemovedObject].self, forKey: .removed)
    // Reports written before tail trimming have no `trimmed`.
    trimmed = try container.decodeIfPresent([TrimmedObject].self, forKey: .trimmed) ?? []
    skippedBusy = try container.decode(Int.self, forKey: .skippedBusy)
    pinnedKept = try container.decode(Int.self, forKey: .pinnedKept)
    vetoed = try container.decode(Int.self, forKey: .vetoed)
    tmpReaped = try container.decode(Int.self, forKey: .tmpReaped)
    orphansRemoved = try container.decode(Int.self, forKey: .orphansRemoved)
    chunksScrubbed = try container.decode(Int.self, forKey: .chunksScrubbed)
    bytesScrubbed = try container.decode(Int64.self, forKey: .bytesScrubbed)
    chunksDropped = try container.decode(Int.self, forKey: .chunksDropped)
    droppedChunks = try container.decode([ObjectID: [Int]].self, forKey: .droppedChunks)
    incomplete = try container.decode(Bool.self, forKey: .incomplete)
    duration = .seconds(try container.decode(Double.self, forKey: .duration))
    dryRun = try container.decode(Bool.self, forKey: .dryRun)
    errors = try container.decode([String].self, forKey: .errors)
  }

  /// Encodes every field under its own name, plus `evictedCount`; `evicted` has a key for every
  /// `RemovalReason`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(objectsScanned, forKey: .objectsScanned)
    try container.encode(bytesBefore, forKey: .bytesBefore)
    try container.encode(bytesAfter, forKey: .bytesAfter)
    var everyReason: [RemovalReason: Int] = [:]
    for reason in RemovalReason.allCases { everyReason[reason] = evicted[reason] ?? 0 }
    try container.encode(everyReason, forKey: .evicted)
    try container.encode(evictedCount, forKey: .evictedCount)
    try container.encode(bytesFreed, forKey: .bytesFreed)
    try container.encode(removed, forKey: .removed)
    try container.encode(trimmed, forKey: .trimmed)
    try container.encode(skippedBusy, forKey: .skippedBusy)
    try container.encode(pinnedKept, forKey: .pinnedKept)
    try container.encode(vetoed, forKey: .vetoed)
    try container.encode(tmpReaped, forKey: .tmpReaped)
    try container.encode(orphansRemoved, forKey: .orphansRemoved)
    try container.encode(chunksScrubbed, forKey: .chunksScrubbed)
    try container.encode(bytesScrubbed, forKey: .bytesScrubbed)
    try container.encode(chunksDropped, forKey: .chunksDropped)
    try container.encode(droppedChunks, forKey: .droppedChunks)
    try container.encode(incomplete, forKey: .incomplete)
    // In whole microseconds: a `Duration` made from a `Double` of more digits does not always give the same
    // `Double` back, so a report decoded and encoded again would differ.
    try container.encode((duration.seconds * 1e6).rounded() / 1e6, forKey: .duration)
    try container.encode(dryRun, forKey: .dryRun)
    try container.encode(errors, forKey: .errors)
  }
}
