import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Where `dd` is, from PATH.
func findExecutable(_ name: String) -> String? {
  let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
  for directory in path.split(separator: ":") where !directory.isEmpty {
    let candidate = "\(directory)/\(name)"
    if access(candidate, X_OK) == 0 { return candidate }
  }
  return nil
}

/// Runs `dd` with `arguments` (C locale, stdout to /dev/null, stderr kept) and returns its wall time from spawn
/// to exit. `posix_spawn` + `waitpid` rather than `Process`, whose wait polls a run loop.
func runDD(_ arguments: [String], scratchDirectory: String) throws -> Double {
  guard let dd = findExecutable("dd") else { throw BenchError("dd not found in PATH") }
  let stderrPath = "\(scratchDirectory)/.mediacache-bench-dd.\(getpid()).err"
  defer { unlink(stderrPath) }
  #if os(Linux)
    var actions = posix_spawn_file_actions_t()
  #else
    var actions: posix_spawn_file_actions_t?
  #endif
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
  posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  let argv: [UnsafeMutablePointer<CChar>?] = ([dd] + arguments).map { strdup($0) } + [nil]
  let envp: [UnsafeMutablePointer<CChar>?] = [strdup("LC_ALL=C"), strdup("PATH=/usr/bin:/bin"), nil]
  defer { for pointer in argv + envp { free(pointer) } }
  var pid: pid_t = 0
  let clock = ContinuousClock()
  let start = clock.now
  let spawned = posix_spawn(&pid, dd, &actions, nil, argv, envp)
  guard spawned == 0 else { throw BenchError("cannot run dd: \(errnoText(spawned))") }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) == -1 {
    guard errno == EINTR else { throw BenchError("waitpid failed: \(errnoText())") }
  }
  let elapsed = seconds(clock.now - start)
  // Exited normally with status 0: low 7 bits (signal) and the exit code byte are both zero.
  guard status == 0 else {
    let message = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
    throw BenchError(
      "dd \(arguments.joined(separator: " ")) failed (wait status \(status)): "
        + message.trimmingCharacters(in: .whitespacesAndNewlines))
  }
  return elapsed
}
