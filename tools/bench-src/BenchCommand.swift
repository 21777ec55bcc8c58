// mediacache-bench: measurements behind two claims of the library, and a dump of the manifest format.
//
//   mediacache-bench fileio    --file PATH [--size-mib N] [--piece-kib K] [--rounds R] [--no-dd] [--json]
//   mediacache-bench write-rss --cache DIR [--size-gib G] [--chunk-mib C | --chunk-kib K] [--no-dd] [--json]
//   mediacache-bench make-tree --cache DIR [--objects N]
//   mediacache-bench compactor-pass --cache DIR [--rounds R] [--json]
//   mediacache-bench make-big-tree --cache DIR [--objects N] [--size-mib M]
//   mediacache-bench fsck-pass --cache DIR [--rounds R] [--json]
//   mediacache-bench dump-example-manifest
//
// `fileio` compares ways of reading a file sequentially (why the library uses positional reads).
// `write-rss` writes and reads back one large object through the library and reports peak memory (whole
// objects never sit in RAM). `dump-example-manifest` prints a fixed manifest made by the real encoder, for
// docs/FORMAT.md.
//
// Every subcommand is listed by `mediacache-bench --help`; tools/bench runs the suite ones. Exit status 2 on bad
// arguments, 1 when a measurement fails.

import ArgumentParser
import MediaCacheTestSupport

@main
struct BenchCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "mediacache-bench",
    abstract:
      "Measurements behind the library's claims, the suite of tools/bench, and a dump of the manifest format.",
    subcommands: [
      FileIOCommand.self, WriteRSSCommand.self, MakeTreeCommand.self, CompactorPassCommand.self,
      MakeBigTreeCommand.self, FsckPassCommand.self, RunRSSCommand.self, DiskCommand.self, TreeCommand.self,
      RowCommand.self, TableCommand.self, FloorServerCommand.self, FanoutCommand.self, PlayScriptCommand.self,
      DelayRelayCommand.self, DumpExampleManifestCommand.self, ServeFloorCommand.self, FeedCommand.self,
      MissFloorCommand.self, StallCommand.self,
    ])

  static func main() async { await main(usageStatus: 2) }

  func run() throws { throw ValidationError("missing subcommand") }
}

/// A measurement that failed (exit status 1).
struct BenchError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// A count or size that must be a positive integer.
struct Positive: ExpressibleByArgument, ExpressibleByIntegerLiteral, Sendable {
  var value: Int

  init(_ value: Int) { self.value = value }
  init(integerLiteral value: Int) { self.value = value }
  init?(argument: String) {
    guard let value = Int(argument), value > 0 else { return nil }
    self.value = value
  }

  var defaultValueDescription: String { String(value) }
}
