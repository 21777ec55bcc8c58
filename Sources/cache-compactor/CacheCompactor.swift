import ArgumentParser
import Foundation
import MediaCache
import MediaCacheStreaming
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Set by SIGINT/SIGTERM: finish the current batch, then exit 0.
let stopRequested = Atomic<Bool>(false)

@main
struct CacheCompactor: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "cache-compactor",
    abstract: "Purge a MediaCache directory by age, size and free space, and scrub chunk CRCs.",
    discussion: """
      Runs beside the apps that use the cache: objects open in any process are skipped, pinned objects are \
      kept. SIZE accepts 500M, 10G or plain bytes; DURATION accepts 90d, 12h, 30m, 45s. \
      Exit status: 0 success, 1 the cache cannot be used (missing, unreadable, not a cache), 64 usage error.
      """)

  @Argument(help: "The cache directory.", completion: .directory) var directory: String
  @Option(help: ArgumentHelp("Evict least recently used objects above this size.", valueName: "SIZE"))
  var maxSize: String?
  @Option(
    help: ArgumentHelp("Evict objects not accessed for this long (default 90d).", valueName: "DURATION"))
  var maxAge: String = "90d"
  @Option(help: ArgumentHelp("Keep at least this much free on the file system.", valueName: "SIZE"))
  var minFree: String?
  @Option(
    help: ArgumentHelp(
      "To meet --max-size or --min-free, first cut idle objects (least recently used first) down to what a "
        + "player reads to start them: 5s keeps an MP4's first 5 seconds of every track with its moov, and "
        + "the first 5 s at 4 Mbit/s of anything else; a size keeps the first bytes; off evicts whole objects "
        + "only. Whole objects go after every tail.", valueName: "WINDOW"))
  var keepHeads: String = "5s"
  @Option(help: ArgumentHelp("Verify the CRCs of up to this many chunk bytes per pass.", valueName: "SIZE"))
  var scrub: String?
  @Option(help: ArgumentHelp("Run a pass every DURATION until SIGINT or SIGTERM.", valueName: "DURATION"))
  var interval: String?
  @Option(help: ArgumentHelp("Stop a pass after this long; the next one continues.", valueName: "DURATION"))
  var maxPassTime: String = "60s"
  @Option(help: ArgumentHelp("Reap tmp/ files older than this.", valueName: "DURATION"))
  var tmpGrace: String = "1h"
  @Flag(help: "Decide and report; change nothing.") var dryRun = false
  @Flag(help: "Print one JSON object per pass (its schema: docs/REPORTS.md).") var json = false

  var keepHeadsWindow: HeadWindow? {
    get throws {
      do { return try HeadWindowArgument.parse(keepHeads) } catch { throw ValidationError(error.description) }
    }
  }

  var parsedPolicy: (CompactionPolicy, Double?) {
    get throws {
      func size(_ text: String?, _ name: String) throws -> Int64? {
        guard let text else { return nil }
        guard let value = HumanUnits.parseSize(text) else {
          throw ValidationError("--\(name) '\(text)' is not a size (use 500M, 10G or bytes)")
        }
        return value
      }
      func duration(_ text: String?, _ name: String) throws -> Double? {
        guard let text else { return nil }
        guard let value = HumanUnits.parseDuration(text) else {
          throw ValidationError("--\(name) '\(text)' is not a duration (use 90d, 12h, 30m, 45s)")
        }
        return value
      }
      let interval = try duration(interval, "interval")
      if let interval, interval <= 0 { throw ValidationError("--interval must be positive") }
      let policy = CompactionPolicy(
        maxSize: try size(maxSize, "max-size"), maxAge: try duration(maxAge, "max-age").map { .seconds($0) },
        minFree: try size(minFree, "min-free"), keepHeads: try keepHeadsWindow,
        tmpGracePeriod: .seconds(try duration(tmpGrace, "tmp-grace") ?? 3600),
        scrubBudget: try size(scrub, "scrub") ?? 0,
        maxPassDuration: .seconds(try duration(maxPassTime, "max-pass-time") ?? 60),
        dryRun: dryRun)
      return (policy, interval)
    }
  }

  func validate() throws { _ = try parsedPolicy }

  func run() throws {
    let (policy, interval) = try parsedPolicy
    let store: ShardedStore
    do {
      store = try ShardedStore(root: directory, durability: .durable, create: false)
    } catch {
      FileHandle.standardError.write(Data("cache-compactor: \(error)\n".utf8))
      throw ExitCode(1)
    }
    // The parent may have spawned us with these signals blocked (a test runner's thread, a supervisor).
    var unblock = sigset_t()
    sigemptyset(&unblock)
    for signalNumber in [SIGINT, SIGTERM] {
      signal(signalNumber) { _ in stopRequested.store(true, ordering: .relaxed) }
      sigaddset(&unblock, signalNumber)
    }
    pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    let compactor = Compactor(store: store, policy: policy)
    var pass = 0
    repeat {
      pass += 1
      let report: CompactionReport
      do {
        report = try compactor.runPass { stopRequested.load(ordering: .relaxed) }
      } catch {
        FileHandle.standardError.write(Data("cache-compactor: pass \(pass) failed: \(error)\n".utf8))
        throw ExitCode(1)
      }
      let line: String
      do {
        line =
          json
          ? try ReportJSON.encode(PassReport(pass: pass, report: report)) : Self.summary(report, pass: pass)
      } catch {
        FileHandle.standardError.write(
          Data("cache-compactor: pass \(pass): cannot encode its report: \(error)\n".utf8))
        throw ExitCode(1)
      }
      FileHandle.standardOutput.write(Data((line + "\n").utf8))
      guard let interval else { break }
      let wakeAt = Date().addingTimeInterval(interval)
      while Date() < wakeAt && !stopRequested.load(ordering: .relaxed) { usleep(20_000) }
    } while !stopRequested.load(ordering: .relaxed)
  }

  static func summary(_ report: CompactionReport, pass: Int) -> String {
    let reasons = RemovalReason.allCases.map { "\($0.rawValue) \(report.evicted[$0] ?? 0)" }.joined(
      separator: ", ")
    return """
      pass \(pass)\(report.dryRun ? " (dry run)" : ""): scanned \(report.objectsScanned) objects, \
      \(report.bytesBefore) bytes; \(report.dryRun ? "would trim" : "trimmed") \(report.trimmed.count) tails, \
      \(report.dryRun ? "would evict" : "evicted") \(report.evictedCount) (\(reasons)) freeing \(report.bytesFreed) bytes; now \(report.bytesAfter) bytes; skipped busy \(report.skippedBusy), \
      pinned kept \(report.pinnedKept), vetoed \(report.vetoed); tmp reaped \(report.tmpReaped), orphan data removed \(report.orphansRemoved); \
      scrubbed \(report.chunksScrubbed) chunks (\(report.bytesScrubbed) bytes), dropped \(report.chunksDropped); \
      \(String(format: "%.3f", report.duration.seconds)) s\(report.incomplete ? "; incomplete" : "")\(report.errors.isEmpty ? "" : "; \(report.errors.count) object(s) failed: \(report.errors.prefix(3).joined(separator: "; "))")
      """
  }
}

/// One line of `cache-compactor --json`: the pass number beside the compaction report's keys (the report's JSON
/// as `mediacache purge --json` prints it, plus `pass`; docs/REPORTS.md).
struct PassReport: Codable, Equatable {
  /// 1 for the first pass of this run.
  var pass: Int
  var report: CompactionReport

  private enum CodingKeys: String, CodingKey { case pass }

  init(pass: Int, report: CompactionReport) {
    self.pass = pass
    self.report = report
  }

  init(from decoder: any Decoder) throws {
    report = try CompactionReport(from: decoder)
    pass = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .pass)
  }

  func encode(to encoder: any Encoder) throws {
    try report.encode(to: encoder)
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(pass, forKey: .pass)
  }
}
