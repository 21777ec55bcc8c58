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
      Exit status: 0 success, 1 the cache cannot be used (missing, unreadable, not a cache) or a single pass \
      failed, 64 usage error. With --interval a failed pass is reported on standard error and the next one \
      runs; SIGINT or SIGTERM ends the loop with 0.

      Each pass covers the root's objects and then every namespace under DIRECTORY/namespaces/ (MediaCache's \
      Configuration.namespaces), each against its own limits: those --namespace gives it, else the ones \
      above. Example: --max-size 2G --namespace image:max-size=200M,max-age=7d --namespace video:max-size=20G
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
  @Option(
    name: .customLong("namespace"),
    help: ArgumentHelp(
      "Limits of one namespace (repeatable): max-size, max-age, min-free and keep-heads, as the options of "
        + "the same names; the others come from those options.", valueName: "NAME:KEY=VALUE,…"))
  var namespaceLimits: [String] = []
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
          throw ValidationError(
            "--\(name) '\(text)' is not a duration (use 90d, 12h, 30m, 45s; at most 1e12 s)")
        }
        return value
      }
      let interval = try duration(interval, "interval")
      if let interval, interval <= 0 { throw ValidationError("--interval must be positive") }
      // A pass given no time at all would end before it began, every time.
      if let time = try duration(maxPassTime, "max-pass-time"), time <= 0 {
        throw ValidationError("--max-pass-time must be positive")
      }
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

  /// The policy of each namespace given `--namespace`, by name: the top-level policy with its own values.
  func namespacePolicies(base: CompactionPolicy) throws -> [String: CompactionPolicy] {
    var policies: [String: CompactionPolicy] = [:]
    for text in namespaceLimits {
      let (name, settings) =
        text.firstIndex(of: ":").map {
          (String(text[..<$0]), String(text[text.index(after: $0)...]))
        } ?? (text, "")
      do { try NamespaceName.validated(name) } catch {
        throw ValidationError("--namespace '\(text)': \(error)")
      }
      guard policies[name] == nil else { throw ValidationError("--namespace \(name) is given twice") }
      var policy = base
      for setting in settings.split(separator: ",", omittingEmptySubsequences: true) {
        let parts = setting.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else {
          throw ValidationError("--namespace \(name): '\(setting)' is not KEY=VALUE")
        }
        let (key, value) = (parts[0], parts[1])
        func size() throws -> Int64 {
          guard let size = HumanUnits.parseSize(value) else {
            throw ValidationError(
              "--namespace \(name): \(key) '\(value)' is not a size (use 500M, 10G or bytes)")
          }
          return size
        }
        switch key {
        case "max-size": policy.maxSize = try size()
        case "min-free": policy.minFree = try size()
        case "max-age":
          guard let seconds = HumanUnits.parseDuration(value) else {
            throw ValidationError(
              "--namespace \(name): max-age '\(value)' is not a duration (use 90d, 12h; at most 1e12 s)")
          }
          policy.maxAge = .seconds(seconds)
        case "keep-heads":
          do { policy.keepHeads = try HeadWindowArgument.parse(value) } catch {
            throw ValidationError("--namespace \(name): \(error.description)")
          }
        default:
          throw ValidationError(
            "--namespace \(name): unknown key '\(key)' (use max-size, max-age, min-free, keep-heads)")
        }
      }
      policies[name] = policy
    }
    return policies
  }

  func validate() throws { _ = try namespacePolicies(base: try parsedPolicy.0) }

  func run() throws {
    let (policy, interval) = try parsedPolicy
    // The parent may have spawned us with these signals blocked (a test runner's thread, a supervisor).
    var unblock = sigset_t()
    sigemptyset(&unblock)
    for signalNumber in [SIGINT, SIGTERM] {
      signal(signalNumber) { _ in stopRequested.store(true, ordering: .relaxed) }
      sigaddset(&unblock, signalNumber)
    }
    pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    var store: ShardedStore?
    var toldEmpty = false
    repeat {
      do {
        store = try ShardedStore(root: directory, durability: .durable, create: false)
      } catch let error as StoreError
        where error.code == .noSuchCache && FileManager.default.fileExists(atPath: directory)
      {
        // An empty directory (systemd's CacheDirectory= before the proxy's first start): nothing to compact
        // yet. A compactor with --interval looks again after each interval.
        if !toldEmpty {
          FileHandle.standardError.write(Data("cache-compactor: \(error); nothing to do\n".utf8))
        }
        toldEmpty = true
        guard let interval else { return }
        let wakeAt = Date().addingTimeInterval(interval)
        while Date() < wakeAt && !stopRequested.load(ordering: .relaxed) { usleep(20_000) }
      } catch {
        FileHandle.standardError.write(Data("cache-compactor: \(error)\n".utf8))
        throw ExitCode(1)
      }
    } while store == nil && !stopRequested.load(ordering: .relaxed)
    guard let store else { return }
    let policies = try namespacePolicies(base: policy)
    var pass = 0
    repeat {
      pass += 1
      let trees: [(String?, Compactor)] =
        [(nil, Compactor(store: store, policy: policy))] + namespaceCompactors(policies, base: policy)
      for (namespace, compactor) in trees {
        if stopRequested.load(ordering: .relaxed) { break }
        try runPass(compactor, pass: pass, namespace: namespace)
      }
      guard let interval else { break }
      let wakeAt = Date().addingTimeInterval(interval)
      while Date() < wakeAt && !stopRequested.load(ordering: .relaxed) { usleep(20_000) }
    } while !stopRequested.load(ordering: .relaxed)
  }

  /// A compactor for each namespace on disk now (a directory under `namespaces/` with a valid name), with the
  /// policy `--namespace` gives it, else the top-level one. A namespace that cannot be opened is skipped with
  /// a line on standard error.
  func namespaceCompactors(_ policies: [String: CompactionPolicy], base: CompactionPolicy) -> [(
    String?, Compactor
  )] {
    let parent = "\(directory)/namespaces"
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? []).sorted()
    return names.compactMap { name -> (String?, Compactor)? in
      guard (try? NamespaceName.validated(name)) != nil else { return nil }
      do {
        let store = try ShardedStore(root: "\(parent)/\(name)", durability: .durable, create: false)
        return (name, Compactor(store: store, policy: policies[name] ?? base))
      } catch {
        FileHandle.standardError.write(Data("cache-compactor: namespace \(name) skipped: \(error)\n".utf8))
        return nil
      }
    }
  }

  /// One pass of `compactor`, reported as one line (`namespace` null for the root's own objects).
  func runPass(_ compactor: Compactor, pass: Int, namespace: String?) throws {
    let report: CompactionReport
    let label = namespace.map { "namespace \($0): " } ?? ""
    do {
      report = try compactor.runPass { stopRequested.load(ordering: .relaxed) }
    } catch {
      FileHandle.standardError.write(Data("cache-compactor: \(label)pass \(pass) failed: \(error)\n".utf8))
      // With --interval the next pass tries again: a compactor that ended on one failed pass (a full disk, a
      // tree being moved) would leave the cache to grow under its supervisor. A single pass reports it.
      if interval != nil { return }
      throw ExitCode(1)
    }
    let line: String
    do {
      line =
        json
        ? try ReportJSON.encode(PassReport(Pass(pass: pass, namespace: namespace), report: report))
        : label + Self.summary(report, pass: pass)
    } catch {
      FileHandle.standardError.write(
        Data("cache-compactor: \(label)pass \(pass): cannot encode its report: \(error)\n".utf8))
      throw ExitCode(1)
    }
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
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

/// One line of `cache-compactor --json`: the pass number and the namespace beside the compaction report's keys
/// (the report's JSON as `mediacache purge --json` prints it, plus `pass` and `namespace`; docs/REPORTS.md).
typealias PassReport = ReportWithContext<Pass, CompactionReport>

/// What a line of `cache-compactor --json` says beside the compaction report's keys.
struct Pass: Codable, Equatable {
  /// 1 for the first pass of this run.
  var pass: Int
  /// The namespace the pass covered; `null` for the root's own objects.
  @NullWhenAbsent var namespace: String?
}
