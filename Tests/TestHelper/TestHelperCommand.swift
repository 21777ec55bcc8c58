// A second process for the integration tests: it writes and holds cache objects so that crashes
// (SIGKILL mid-write), concurrent writers and in-use locks are exercised across real processes.
//
//   mediacache-testhelper write CACHE KEY SOURCE [--chunk-size N] [--piece N] [--delay-ms N]
//                                                  [--durable] [--only even|odd] [--commit-bytes N]
//   mediacache-testhelper read CACHE KEY SOURCE [--seconds S]  (verifies every byte it reads)
//   mediacache-testhelper hold CACHE KEY     (prints "holding", waits for stdin to close, then exits)
//   mediacache-testhelper open-cache CACHE in-task|on-executor
//       opens a cache (creating its directories: blocking calls) in a Swift task, or in a task that hands the
//       open to `IOExecutor.shared`; prints "opened". For the tests of `MEDIACACHE_BLOCKING_CHECK`.
//   mediacache-testhelper touch-object CACHE in-task|on-executor
//       stamps an object's recency (a `utimensat`) in a Swift task, or through the I/O executor; prints
//       "touched". For the same tests.
//
// Exit status 2 on bad arguments or an error, 3 when `read` sees a wrong byte.
import ArgumentParser
import Foundation
import MediaCacheTestSupport

@main
struct TestHelperCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "mediacache-testhelper",
    abstract: "A second process for the integration tests: writes, reads and holds cache objects.",
    subcommands: [
      WriteCommand.self, ReadCommand.self, HoldCommand.self, OpenCacheCommand.self, TouchObjectCommand.self,
    ])

  static func main() async { await main(usageStatus: 2) }

  func run() async throws { die("usage: write|hold …") }
}

func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func die(_ message: String) -> Never {
  FileHandle.standardError.write(Data("mediacache-testhelper: \(message)\n".utf8))
  exit(2)
}

/// Runs `body`, turning any error into `die`.
func dyingOnError(_ body: () async throws -> Void) async {
  do {
    try await body()
  } catch {
    die("\(error)")
  }
}
