import ArgumentParser
import Foundation
import MediaCacheTestSupport

/// The command line of mediacache-torture: the trials (the default subcommand, see TortureRun.swift) and the
/// soak (`soak`, see SoakRun.swift). Exit status 0 when nothing failed, 1 otherwise, 2 on bad arguments.
@main
struct TortureCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "mediacache-torture",
    abstract: "Crash, fault and abuse trials and the soak against the real binaries (run them through "
      + "tools/torture and tools/soak).",
    subcommands: [TrialsCommand.self, SoakCommand.self], defaultSubcommand: TrialsCommand.self)

  static func main() async { await main(usageStatus: 2) }
}

/// `mediacache-torture [trials] …`: the crash, fault and abuse trials.
struct TrialsCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "trials",
    abstract: "Crash, fault and abuse trials against the real binaries (run it through tools/torture).")

  @Option(name: .customLong("bin"), help: "The directory of the built products.") var binaries: String
  @Option(help: "The directory the trials work in.") var work: String
  @Option(help: "Trials of each crash class.") var trials = 3
  @Option(help: "Length of the many-processes run (0 skips it).") var minutes = 0.5
  @Option(help: "Run seed (default random).") var seed: UInt64?
  @Option(help: "Some of \(allClasses.joined(separator: ",")) (default all).") var classes: String?
  @Option(help: "Run only trial K of each class given.") var onlyTrial: Int?
  @Option(help: "Also write the figures as JSON to FILE.") var json: String?
  @Option(help: "Trials run at once, each in its own directory (default 1).") var parallel = 1
  @Option(
    help: "Append each finished trial to FILE and skip the trials it already holds (resumes a stopped run).")
  var journal: String?

  func validate() throws {
    guard trials >= 0 else { throw ValidationError("--trials needs N >= 0") }
    guard minutes >= 0 else { throw ValidationError("--minutes needs M >= 0") }
    if let onlyTrial, onlyTrial < 0 { throw ValidationError("--only-trial needs K >= 0") }
    guard (1...64).contains(parallel) else { throw ValidationError("--parallel needs 1 <= P <= 64") }
    for name in classNames where !allClasses.contains(name) {
      throw ValidationError("unknown class \(name) (known: \(allClasses.joined(separator: ", ")))")
    }
    if binaries.isEmpty || work.isEmpty { throw ValidationError("--bin and --work are required") }
  }

  private var classNames: [String] { classes.map { $0.split(separator: ",").map(String.init) } ?? allClasses }

  func run() async throws {
    var options = Options()
    options.binaries = binaries
    options.work = work
    options.trials = trials
    options.minutes = minutes
    if let seed {
      options.seed = seed
      options.seedGiven = true
    }
    options.parallel = parallel
    options.journal = journal
    options.classes = allClasses.filter { classNames.contains($0) }
    options.onlyTrial = onlyTrial
    options.json = json
    Foundation.exit(await runTorture(options))
  }
}
