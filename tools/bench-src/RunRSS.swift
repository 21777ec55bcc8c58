// `mediacache-bench run-rss -- COMMAND [ARGS...]`: runs a command and reports its wall time and peak RSS
// (from wait4's rusage), so a separate process such as `mediacache fetch` can be measured like `curl`.

import ArgumentParser
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

struct RunRSSCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "run-rss",
    abstract: "Run COMMAND (stdout to /dev/null) and print its wall time and peak RSS (wait4 rusage).",
    discussion: "Exit status 1, not 2, when COMMAND is missing, as before.")

  @Argument(parsing: .postTerminator, help: "-- COMMAND [ARGS...]") var command: [String] = []

  func run() throws {
    // Any failure here, a missing COMMAND included, exits 1.
    guard !command.isEmpty else { throw BenchError("run-rss needs -- COMMAND [ARGS...]") }
    let program = command[0].contains("/") ? command[0] : (findExecutable(command[0]) ?? command[0])
    let clock = ContinuousClock()
    let start = clock.now
    var pid: pid_t = 0
    let cArguments = command.map { strdup($0) } + [nil]
    defer { for pointer in cArguments { free(pointer) } }
    var fileActions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&fileActions)
    defer { posix_spawn_file_actions_destroy(&fileActions) }
    posix_spawn_file_actions_addopen(&fileActions, 1, "/dev/null", O_WRONLY, 0)
    let spawned = posix_spawn(&pid, program, &fileActions, nil, cArguments, environ)
    guard spawned == 0 else { throw BenchError("cannot run \(program): \(errnoText(spawned))") }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    let elapsed = seconds(clock.now - start)
    let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    print(
      "run-rss: \(command.joined(separator: " ")): exit \(exitCode), \(fixed(elapsed, 3)) s, peak RSS \(fixed(Double(usage.ru_maxrss) / 1024, 1)) MiB"
    )
    if exitCode != 0 { throw BenchError("\(program) exited \(exitCode)") }
  }
}
