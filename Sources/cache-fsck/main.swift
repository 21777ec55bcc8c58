import ArgumentParser
import Foundation
import MediaCache
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Set by SIGINT: stop after the current object, print what was found, exit with 32 or-ed in.
let cancelRequested = Atomic<Bool>(false)

/// e2fsck's exit bits.
enum FsckExit {
  static let operational: Int32 = 8
  static let usage: Int32 = 16
}

struct CacheFsck: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "cache-fsck",
    abstract: "Check, and with --repair fix, a MediaCache directory.",
    discussion: """
      Exit status is a bitmask as in e2fsck: 0 clean, 1 errors corrected, 4 errors left uncorrected, \
      8 operational error, 16 usage error, 32 cancelled. Objects in use by another process are never touched. \
      Unknown files are reported as warnings and never deleted.
      """)

  @Argument(help: "The cache directory.", completion: .directory) var directory: String
  @Flag(name: [.customShort("n"), .customLong("check")], help: "Check only; write nothing (the default).")
  var checkOnly = false
  @Flag(
    help:
      "Fix what can be fixed: drop bad chunks, remove unreadable objects and orphans, move misplaced objects."
  )
  var repair = false
  @Flag(help: "Check metadata only; do not read chunk data.") var fast = false
  @Flag(help: "Print findings and totals as JSON.") var json = false
  @Flag(help: "Show objects and bytes checked, and the rate, on a terminal.") var progress = false
  @Option(help: ArgumentHelp("tmp/ files younger than this belong to live writers.", valueName: "SECONDS"))
  var tmpGrace: Double = 3600

  func validate() throws {
    if checkOnly && repair { throw ValidationError("-n/--check and --repair exclude each other") }
    guard HumanUnits.isDuration(tmpGrace) else {
      throw ValidationError(
        "--tmp-grace must be 0 to \(Int(HumanUnits.maxDurationSeconds)) seconds, not \(tmpGrace)")
    }
  }

  static func main() {
    let command: CacheFsck
    do {
      let parsed = try parseAsRoot()
      guard let fsck = parsed as? CacheFsck else {
        print(helpMessage())
        Foundation.exit(0)
      }
      command = fsck
    } catch {
      let code = exitCode(for: error)
      if code == .success {
        exit(withError: error)
      }
      FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
      Foundation.exit(FsckExit.usage)
    }
    Foundation.exit(command.execute())
  }

  func execute() -> Int32 {
    var unblock = sigset_t()
    sigemptyset(&unblock)
    sigaddset(&unblock, SIGINT)
    signal(SIGINT) { _ in cancelRequested.store(true, ordering: .relaxed) }
    pthread_sigmask(SIG_UNBLOCK, &unblock, nil)

    let checker = CacheChecker(
      root: FilePath(directory),
      options: .init(repair: repair, fast: fast, tmpGracePeriod: .seconds(tmpGrace)))
    let started = Date()
    let showProgress = progress && isatty(STDERR_FILENO) == 1
    var lastDraw = Date.distantPast
    let report: CheckReport
    do {
      report = try checker.run(isCancelled: { cancelRequested.load(ordering: .relaxed) }) { step in
        guard showProgress,
          Date().timeIntervalSince(lastDraw) > 0.2 || step.objectsChecked == step.objectsTotal
        else { return }
        lastDraw = Date()
        let elapsed = max(Date().timeIntervalSince(started), 0.001)
        let line = String(
          format: "\r%d/%d objects, %.1f MiB verified, %.1f MiB/s ", step.objectsChecked, step.objectsTotal,
          Double(step.bytesVerified) / 1_048_576, Double(step.bytesVerified) / 1_048_576 / elapsed)
        FileHandle.standardError.write(Data(line.utf8))
      }
    } catch {
      if json {
        print((try? ReportJSON.encode(FsckFailure(error: error.description))) ?? "")
      }
      FileHandle.standardError.write(Data("cache-fsck: \(error)\n".utf8))
      return FsckExit.operational
    }
    if showProgress { FileHandle.standardError.write(Data("\n".utf8)) }
    let elapsed = Date().timeIntervalSince(started)
    if json {
      let output = FsckOutput(root: directory, repair: repair, fast: fast, report: report)
      do {
        print(try ReportJSON.encode(output))
      } catch {
        FileHandle.standardError.write(Data("cache-fsck: cannot encode the report: \(error)\n".utf8))
        return FsckExit.operational
      }
    } else {
      print(Self.human(report, root: directory, elapsed: elapsed))
    }
    return report.exitStatus
  }

  static func human(_ report: CheckReport, root: String, elapsed: Double) -> String {
    var lines: [String] = []
    for finding in report.findings {
      var line = finding.severity == .warning ? "warning: \(finding.path): " : "\(finding.path): "
      line += finding.message
      if let expected = finding.expected, let found = finding.found {
        line += " (expected \(expected), found \(found))"
      }
      switch finding.action {
      case .none: break
      case .repaired: line += ": repaired"
      case .skippedBusy: line += ": NOT repaired, object in use"
      case .failed: line += ": repair FAILED"
      }
      lines.append(line)
    }
    let totals = report.totals
    let rate = elapsed > 0 ? Double(totals.bytesVerified) / 1_048_576 / elapsed : 0
    let errors = report.findings.filter { $0.severity == .error }.count
    let warnings = report.findings.count - errors
    var summary =
      "cache-fsck: \(root): \(totals.objects) objects (\(totals.complete) complete, \(totals.partial) partial, "
    summary += "\(totals.pinned) pinned, \(totals.busy) busy), \(totals.bytes) bytes; "
    summary +=
      "verified \(totals.chunksVerified) chunks (\(totals.bytesVerified) bytes, \(String(format: "%.1f", rate)) MiB/s); "
    if errors == 0 {
      summary += "clean"
    } else {
      summary += "\(errors) error(s): \(report.corrected) corrected, \(report.uncorrected) uncorrected"
    }
    if warnings > 0 { summary += ", \(warnings) warning(s)" }
    if report.cancelled { summary += "; CANCELLED before the end" }
    lines.append(summary)
    return lines.joined(separator: "\n")
  }
}

/// `cache-fsck --json` (docs/REPORTS.md): the check report's keys, plus the directory checked, the mode, whether
/// it was `--fast`, and the exit status.
typealias FsckOutput = ReportWithContext<FsckRun, CheckReport>

/// What `cache-fsck --json` prints beside the check report's keys.
struct FsckRun: Codable, Equatable {
  /// The cache directory as given.
  var root: String
  /// `check` or `repair`.
  var mode: String
  /// Whether it was `--fast` (no chunk read).
  var fast: Bool
  /// The exit status the run ends with (e2fsck's bits; see `CheckReport.exitStatus`).
  var exitCode: Int32
}

extension ReportWithContext where Context == FsckRun, Report == CheckReport {
  init(root: String, repair: Bool, fast: Bool, report: CheckReport) {
    self.init(
      FsckRun(root: root, mode: repair ? "repair" : "check", fast: fast, exitCode: report.exitStatus),
      report: report)
  }
}

/// `cache-fsck --json` when the check could not run: the error and exit status 8.
struct FsckFailure: Codable, Equatable {
  var error: String
  var exitCode: Int32 = FsckExit.operational
}

CacheFsck.main()
