import ArgumentParser
import Foundation

extension AsyncParsableCommand {
  /// Parses the command line and runs the command, as `main()` does, except that a usage error (an unknown or
  /// missing argument, a bad value, a failed `validate()`, a `ValidationError` thrown by `run()`) prints
  /// ArgumentParser's message and exits `usageStatus` instead of 64: the test and bench tools have always
  /// exited 2 on bad arguments, and their scripts and tests rely on it. `--help` exits 0; any other error
  /// `run()` throws exits as `main()` would have it (an `ExitCode` with its code, anything else 1).
  public static func main(usageStatus: Int32) async {
    do {
      let parsed = try parseAsRoot()
      if var command = parsed as? any AsyncParsableCommand {
        try await command.run()
      } else {
        var command = parsed
        try command.run()
      }
    } catch {
      guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
      FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
      Foundation.exit(usageStatus)
    }
  }
}
