import Foundation
import MediaCacheTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What a finished command printed and returned.
struct CommandResult {
  var status: Int32
  var stdout: Data
  var stderr: String
  var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs a program to completion.
@available(*, noasync, message: "blocks a thread of the cooperative pool: use the async run")
func runOnThisThread(_ program: String, _ arguments: [String], environment: [String: String]? = nil) throws
  -> CommandResult
{
  let child = try ChildProcess(program, arguments, environment: environment)
  child.closeInput()
  return child.waitOnThisThread()
}

/// `run` waited on from a thread of its own, so the child never holds one of the few threads of Swift's
/// cooperative pool (two on a 2-core CI machine) that every test of the process and the code under test share.
/// A child killed as hung is recorded here, in the calling test's task: recorded on that thread, the issue
/// would belong to no test ("«unknown»").
func run(_ program: String, _ arguments: [String], environment: [String: String]? = nil) async throws
  -> CommandResult
{
  let timeout = 120.0
  let (result, killed) = try await blocking {
    let child = try ChildProcess(program, arguments, environment: environment)
    child.closeInput()
    return child.waitOrKillOnThisThread(timeout: timeout)
  }
  if killed { ChildProcess.recordKilled(URL(fileURLWithPath: program).lastPathComponent, timeout) }
  return result
}

/// A child process whose standard output is collected as it arrives, so a test can wait for a line.
final class ChildProcess: Sendable {
  let process: Process
  private let input: Pipe
  private let output: Pipe
  private let errors: Pipe
  private let collected = OutputBuffer()
  /// Entered while a reader thread still reads a pipe.
  private let readers = DispatchGroup()

  /// Output shared with the pipes' reader threads.
  private final class OutputBuffer: Sendable {
    let data = Mutex<(out: Data, err: Data)>((Data(), Data()))
    func withLock<T>(_ body: (inout (out: Data, err: Data)) -> T) -> T { data.withLock { body(&$0) } }
  }

  init(_ program: String, _ arguments: [String], environment: [String: String]? = nil) throws {
    // The pipes and the spawn while no other thread spawns (`spawningAlone`: else another child may inherit
    // them, and this one's exit is not seen until that one ends).
    (process, input, output, errors) = try spawningAlone {
      let process = Process()
      let (input, output, errors) = (Pipe(), Pipe(), Pipe())
      process.executableURL = URL(fileURLWithPath: program)
      process.arguments = arguments
      if let environment { process.environment = environment }
      process.standardInput = input
      process.standardOutput = output
      process.standardError = errors
      try process.run()
      return (process, input, output, errors)
    }
    // One thread per pipe reads until end of file. Not `readabilityHandler`: its dispatch source can outlive
    // the descriptor it watches when the handle is released, and with many children in parallel a reused
    // descriptor number crashed libdispatch's event loop (`_dispatch_event_loop_drain`) in the test process.
    for (handle, isOutput) in [(output.fileHandleForReading, true), (errors.fileHandleForReading, false)] {
      readers.enter()
      let collected = self.collected
      let readers = self.readers
      Thread.detachNewThread {
        while true {
          let data = handle.availableData
          if data.isEmpty { break }
          collected.withLock { isOutput ? $0.out.append(data) : $0.err.append(data) }
        }
        readers.leave()
      }
    }
  }

  var pid: Int32 { process.processIdentifier }

  var outputSoFar: String { collected.withLock { String(decoding: $0.out, as: UTF8.self) } }
  var errorsSoFar: String { collected.withLock { String(decoding: $0.err, as: UTF8.self) } }

  /// Waits until some output line satisfies `predicate`, the process exits, or `timeout` passes.
  @available(*, noasync, message: "blocks a thread of the cooperative pool: use the async waitForLine")
  @discardableResult
  func waitForLineOnThisThread(timeout: Double = 60, _ predicate: (Substring) -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if outputSoFar.split(separator: "\n").contains(where: predicate) { return true }
      if !process.isRunning {
        // The last output may still be in the pipe (the reader threads run on their own): read it all first.
        drainOutput()
        return outputSoFar.split(separator: "\n").contains(where: predicate)
      }
      usleep(2000)
    }
    return false
  }

  /// `waitForLine` from a thread of its own (see `run`).
  @discardableResult
  func waitForLine(timeout: Double = 60, _ predicate: @escaping @Sendable (Substring) -> Bool) async -> Bool {
    await onOwnThread { self.waitForLineOnThisThread(timeout: timeout, predicate) }
  }

  func closeInput() { try? input.fileHandleForWriting.close() }

  /// Runs `body`, then (also when it throws) closes the child's input and waits up to `timeout` seconds for it
  /// to exit: the async stand-in for `defer { closeInput(); wait() }`, since a defer body cannot await.
  func closingInputAfter<T>(timeout: Double = 30, _ body: () async throws -> T) async throws -> T {
    let result: Result<T, any Error>
    do { result = .success(try await body()) } catch { result = .failure(error) }
    closeInput()
    _ = await wait(timeout: timeout)
    return try result.get()
  }

  /// After exit: waits until the reader threads have read both pipes to end of file (a second call returns at
  /// once).
  private func drainOutput() {
    process.waitUntilExit()
    readers.wait()
  }

  func kill(_ signal: Int32 = SIGKILL) { _ = Glibc.kill(process.processIdentifier, signal) }

  /// Waits for exit and returns everything it printed. A child still running after `timeout` seconds is killed
  /// (SIGKILL) and the test records an issue, so a hung child never hangs the suite.
  @available(*, noasync, message: "blocks a thread of the cooperative pool: use the async wait")
  func waitOnThisThread(timeout: Double = 120) -> CommandResult {
    let (result, killed) = waitOrKill(timeout: timeout)
    if killed { Self.recordKilled(name, timeout) }
    return result
  }

  /// `waitOnThisThread` that leaves the issue of a kill to the caller (for a thread that belongs to no test).
  @available(*, noasync, message: "blocks a thread of the cooperative pool: use the async wait")
  func waitOrKillOnThisThread(timeout: Double) -> (CommandResult, killed: Bool) {
    waitOrKill(timeout: timeout)
  }

  /// `wait` from a thread of its own (see `run`); the issue, if any, is recorded in the calling test's task.
  func wait(timeout: Double = 120) async -> CommandResult {
    let (result, killed) = await onOwnThread { self.waitOrKill(timeout: timeout) }
    if killed { Self.recordKilled(name, timeout) }
    return result
  }

  private var name: String { process.executableURL?.lastPathComponent ?? "child" }

  static func recordKilled(_ name: String, _ timeout: Double) {
    Issue.record("\(name) still running after \(timeout) s; killed")
  }

  /// Blocks until exit, killing the child after `timeout` seconds; whether it was killed.
  private func waitOrKill(timeout: Double) -> (CommandResult, killed: Bool) {
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(1000) }
    let killed = process.isRunning
    if killed { kill(SIGKILL) }
    drainOutput()
    let result = collected.withLock {
      CommandResult(
        status: process.terminationStatus, stdout: $0.out, stderr: String(decoding: $0.err, as: UTF8.self))
    }
    return (result, killed)
  }
}
