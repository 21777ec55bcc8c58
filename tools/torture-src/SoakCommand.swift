import ArgumentParser
import Foundation

/// `mediacache-torture soak`: everything at once on one cache for `--minutes` (run it through tools/soak).
struct SoakCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "soak",
    abstract: "Players, eviction, compaction, checks, origin faults, proxy kills and a full disk at once "
      + "(run it through tools/soak).")

  @Option(name: .customLong("bin"), help: "The directory of the built products.") var binaries: String
  @Option(help: "The directory the soak works in (a tmpfs is mounted in it when possible).") var work: String
  @Option(help: "How long the soak runs.") var minutes = 2.0
  @Option(help: "Run seed (default random; printed first).") var seed: UInt64?
  @Option(help: "Players reading through the proxy at once.") var players = 64
  @Option(help: "Also write the report as JSON to FILE.") var json: String?

  func validate() throws {
    guard minutes > 0 else { throw ValidationError("--minutes needs M > 0") }
    guard players > 0 else { throw ValidationError("--players needs N > 0") }
    if binaries.isEmpty || work.isEmpty { throw ValidationError("--bin and --work are required") }
  }

  func run() async throws {
    var options = SoakOptions()
    options.binaries = binaries
    options.work = work
    options.minutes = minutes
    options.seed = seed ?? UInt64(UInt32.random(in: 1...UInt32.max))
    options.players = players
    options.json = json
    Foundation.exit(await runSoak(options))
  }
}
