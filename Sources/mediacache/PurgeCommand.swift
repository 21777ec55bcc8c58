import ArgumentParser
import MediaCache

/// `mediacache purge`: one compaction pass, in this process, with the limits given.
struct PurgeCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "purge",
    abstract: "Evict least recently used objects until the cache fits in --max-size.",
    discussion: """
      Runs one compaction pass now, in this process, with the engine cache-compactor uses: objects not \
      accessed for longer than --max-age are evicted, then the least recently accessed ones until the bytes \
      on disk are at most --max-size. Pinned objects, and objects any process has open (busy), are kept and \
      counted. Stale staging files in tmp/ are removed. Give at least one limit. Prints one summary line, or \
      with --json the compaction report as one JSON object (the keys cache-compactor --json prints, but pass; \
      docs/REPORTS.md).

      Exit status: 0 once the pass has run (even if pinned or busy objects keep the cache above the size), \
      1 if some object could not be evicted, 4 if the cache directory does not exist or is not a cache, \
      64 for a bad size or duration.

      Example: mediacache purge --max-size 2G --max-age 30d
      """)

  @OptionGroup var cache: CacheOptions
  @Option(
    help: ArgumentHelp(
      "Evict least recently used objects until at most SIZE bytes are on disk.",
      discussion: "Bytes, or a number with a binary unit: 1073741824, 512K, 500M, 1.5G, 1T.",
      valueName: "SIZE"),
    transform: ByteSizeArgument.parse)
  var maxSize: ByteSizeArgument?
  @Option(help: KeepHeadsArgument.help, transform: KeepHeadsArgument.parse)
  var keepHeads = KeepHeadsArgument.mediaStart
  @Option(
    help: ArgumentHelp(
      "Evict objects not accessed for more than SECONDS (or 90d, 12h, 30m).", valueName: "SECONDS"),
    transform: PurgeCommand.parseAge)
  var maxAge: Double?
  @Flag(help: "Print a JSON object instead of the summary line.") var json = false

  /// Seconds from `86400`, `90d`, `12h`, `30m` or `45s`.
  static func parseAge(_ text: String) throws -> Double {
    guard let seconds = HumanUnits.parseDuration(text) else {
      throw ValidationError(
        "'\(text)' is not a duration (use seconds, or 90d, 12h, 30m, 45s; at most 1e12 s)")
    }
    return seconds
  }

  func validate() throws {
    if maxSize == nil && maxAge == nil {
      throw ValidationError("give --max-size SIZE, --max-age SECONDS or both")
    }
  }

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      let opened = try cache.openExisting { configuration in
        configuration.maxSize = maxSize?.bytes
        configuration.keepHeads = keepHeads.window
        configuration.maxAge = maxAge.map { .seconds($0) }
        // Down to the size asked for, not to a share of it as the background compactor does.
        configuration.lowWatermark = 1
      }
      guard let mediaCache = opened else {
        throw fail("no cache at \(cache.resolvedDirectory): nothing to purge", .badCache)
      }
      let report = try await mediaCache.purge()
      if json { try printJSON(report) } else { printOut(Self.summary(report)) }
      if let first = report.errors.first {
        // One object may fail twice (its tail's trim, then its eviction): each is counted once.
        let objects = Set(report.errors.map { $0.prefix { $0 != ":" } }).count
        throw fail("\(objects) object(s) could not be evicted; first: \(first)", .failure)
      }
    }
  }

  static func summary(_ report: CompactionReport) -> String {
    let reasons = [RemovalReason.size, .age, .corrupt].compactMap { reason in
      report.evicted[reason].map { "\(reason.rawValue) \($0)" }
    }
    return (report.trimmed.isEmpty ? "" : "cut the tails of \(report.trimmed.count) objects, ")
      + "evicted \(report.evictedCount) of \(report.objectsScanned) objects"
      + (reasons.isEmpty ? "" : " (\(reasons.joined(separator: ", ")))")
      + ", freed \(report.bytesFreed) bytes; now \(report.bytesAfter) bytes on disk"
      + "; kept \(report.pinnedKept) pinned, skipped \(report.skippedBusy) busy"
      + (report.tmpReaped > 0 ? "; removed \(report.tmpReaped) stale tmp files" : "")
      + (report.orphansRemoved > 0 ? "; removed \(report.orphansRemoved) orphan data files" : "")
      + (report.incomplete ? "; stopped at the time limit, run again" : "")
  }
}
