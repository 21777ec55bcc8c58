import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// How a child process ended.
enum Outcome: Equatable, CustomStringConvertible {
  case exited(Int32)
  case signaled(Int32)
  /// Still running after the timeout; it was killed with SIGKILL (a hang: a deadlock or a lost wake-up).
  case timedOut(Double)

  var description: String {
    switch self {
    case .exited(let code): "exit \(code)"
    case .signaled(let signal): "killed by signal \(signal)"
    case .timedOut(let seconds): "still running after \(Int(seconds)) s (killed)"
    }
  }
}

/// A child process started with `posix_spawn`: standard input from /dev/null, standard output and error into
/// files (so nothing is lost when the child is killed), default signal dispositions and an empty mask.
final class Child: Sendable {
  let pid: pid_t
  let label: String
  let stdoutPath: String
  let stderrPath: String
  private let ended = Mutex<Outcome?>(nil)

  init(_ program: String, _ arguments: [String], stdout: String, stderr: String) throws {
    label = ([(program as NSString).lastPathComponent] + arguments).joined(separator: " ")
    stdoutPath = stdout
    stderrPath = stderr
    #if os(Linux)
      var actions = posix_spawn_file_actions_t()
      var attributes = posix_spawnattr_t()
    #else
      var actions: posix_spawn_file_actions_t?
      var attributes: posix_spawnattr_t?
    #endif
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGPIPE, SIGINT, SIGTERM, SIGCHLD] { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let argv: [UnsafeMutablePointer<CChar>?] = ([program] + arguments).map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] =
      ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for pointer in argv + envp { free(pointer) } }
    var child: pid_t = 0
    let result = posix_spawn(&child, program, &actions, &attributes, argv, envp)
    guard result == 0 else { throw TortureError("cannot run \(program): \(errnoText(result))") }
    pid = child
  }

  /// The outcome if the child has ended (reaping it), else nil.
  func poll() -> Outcome? {
    ended.withLock { ended in
      if let ended { return ended }
      var status: Int32 = 0
      let result = waitpid(pid, &status, WNOHANG)
      guard result == pid else { return nil }
      let outcome: Outcome =
        (status & 0x7F) == 0 ? .exited((status >> 8) & 0xFF) : .signaled(status & 0x7F)
      ended = outcome
      return outcome
    }
  }

  var isRunning: Bool { poll() == nil }

  func signal(_ number: Int32) { if poll() == nil { _ = kill(pid, number) } }

  /// Waits for the end; after `timeout` seconds the child is killed and `.timedOut` returned.
  func wait(timeout: Double) -> Outcome {
    let deadline = monotonicSeconds() + timeout
    while monotonicSeconds() < deadline {
      if let outcome = poll() { return outcome }
      usleep(2000)
    }
    _ = kill(pid, SIGKILL)
    while poll() == nil { usleep(1000) }
    ended.withLock { $0 = .timedOut(timeout) }
    return .timedOut(timeout)
  }

  /// SIGKILL now, then reap. Returns whether the child was still running when the signal was sent.
  @discardableResult
  func killNow() -> Bool {
    guard poll() == nil else { return false }
    _ = kill(pid, SIGKILL)
    while poll() == nil { usleep(500) }
    return true
  }

  /// `killNow()`, recorded in the trial's `commands.log` (from `started`, the driver's clock at the spawn).
  @discardableResult
  func killNow(log: CommandLog, started: Double) -> Bool {
    let killed = killNow()
    log.record(label, from: started, outcome: killed ? .signaled(SIGKILL) : poll()!, output: stdoutPath)
    return killed
  }

  var stdoutText: String { String(decoding: readWholeFile(stdoutPath) ?? [], as: UTF8.self) }
  var stderrText: String {
    String(decoding: readWholeFile(stderrPath) ?? [], as: UTF8.self).trimmingCharacters(
      in: .whitespacesAndNewlines)
  }
}

/// The binaries under test and a place for their output files.
struct Binaries: Sendable {
  let directory: String
  var mediacache: String { "\(directory)/mediacache" }
  var compactor: String { "\(directory)/cache-compactor" }
  var fsck: String { "\(directory)/cache-fsck" }

  func check() throws {
    for path in [mediacache, compactor, fsck] where access(path, X_OK) != 0 {
      throw TortureError("\(path) is missing: build the products first (tools/torture does)")
    }
  }
}

/// Output file names for the commands of one trial (numbered, kept with the trial's files), and
/// `commands.log`: one line per finished command with its start and end (seconds since the trial began), so a
/// failure among concurrent processes can be put in order.
final class CommandLog: Sendable {
  let directory: String
  private let counter = Atomic<Int>(0)
  private let lines = Mutex<FileHandle?>(nil)
  private let started = monotonicSeconds()

  init(directory: String) {
    self.directory = directory
    _ = FileManager.default.createFile(atPath: "\(directory)/commands.log", contents: nil)
    lines.withLock { $0 = FileHandle(forWritingAtPath: "\(directory)/commands.log") }
  }

  deinit { lines.withLock { try? $0?.close() } }

  func record(_ label: String, from start: Double, outcome: Outcome, output: String) {
    let line = String(
      format: "%9.3f %9.3f %@ %@ %@\n", start - started, monotonicSeconds() - started,
      (output as NSString).lastPathComponent, outcome.description, label)
    lines.withLock { try? $0?.write(contentsOf: Data(line.utf8)) }
  }

  func paths(_ tag: String) -> (out: String, err: String) {
    let number = counter.add(1, ordering: .relaxed).newValue
    let base = "\(directory)/\(String(format: "%04d", number))-\(tag)"
    return ("\(base).out", "\(base).err")
  }
}

/// A finished command: how it ended and what it printed.
struct Finished {
  var outcome: Outcome
  var stdoutPath: String
  var stderr: String
  var label: String
  var seconds: Double

  var stdout: [UInt8] { readWholeFile(stdoutPath) ?? [] }
  var text: String { String(decoding: stdout, as: UTF8.self) }
  var status: Int32? {
    if case .exited(let code) = outcome { return code }
    return nil
  }
  var summary: String { "`\(label)`: \(outcome); stderr: \(stderr.isEmpty ? "(empty)" : stderr)" }
}

/// Runs a command to its end (killed after `timeout` seconds).
func runCommand(
  _ program: String, _ arguments: [String], log: CommandLog, tag: String, timeout: Double = 120
) throws -> Finished {
  let paths = log.paths(tag)
  let started = monotonicSeconds()
  let child = try Child(program, arguments, stdout: paths.out, stderr: paths.err)
  let outcome = child.wait(timeout: timeout)
  log.record(child.label, from: started, outcome: outcome, output: paths.out)
  return Finished(
    outcome: outcome, stdoutPath: paths.out, stderr: child.stderrText, label: child.label,
    seconds: monotonicSeconds() - started)
}
