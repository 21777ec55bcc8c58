import Foundation
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
func run(_ program: String, _ arguments: [String], environment: [String: String]? = nil) throws
  -> CommandResult
{
  let child = try ChildProcess(program, arguments, environment: environment)
  child.closeInput()
  return child.wait()
}

/// A child process whose standard output is collected as it arrives, so a test can wait for a line.
final class ChildProcess: Sendable {
  let process: Process
  private let input = Pipe()
  private let output = Pipe()
  private let errors = Pipe()
  private let collected = OutputBuffer()
  /// Entered while a reader thread still reads a pipe.
  private let readers = DispatchGroup()

  /// Output shared with the pipes' reader threads.
  private final class OutputBuffer: Sendable {
    let data = Mutex<(out: Data, err: Data)>((Data(), Data()))
    func withLock<T>(_ body: (inout (out: Data, err: Data)) -> T) -> T { data.withLock { body(&$0) } }
  }

  init(_ program: String, _ arguments: [String], environment: [String: String]? = nil) throws {
    process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    if let environment { process.environment = environment }
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    try process.run()
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
  @discardableResult
  func waitForLine(timeout: Double = 60, _ predicate: (Substring) -> Bool) -> Bool {
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

  func closeInput() { try? input.fileHandleForWriting.close() }

  /// After exit: waits until the reader threads have read both pipes to end of file (a second call returns at
  /// once).
  private func drainOutput() {
    process.waitUntilExit()
    readers.wait()
  }

  func kill(_ signal: Int32 = SIGKILL) { _ = Glibc.kill(process.processIdentifier, signal) }

  /// Waits for exit and returns everything it printed. A child still running after `timeout` seconds is killed
  /// (SIGKILL) and the test records an issue, so a hung child never hangs the suite.
  func wait(timeout: Double = 120) -> CommandResult {
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(1000) }
    if process.isRunning {
      Issue.record(
        "\(process.executableURL?.lastPathComponent ?? "child") still running after \(timeout) s; killed")
      kill(SIGKILL)
    }
    drainOutput()
    return collected.withLock {
      return CommandResult(
        status: process.terminationStatus, stdout: $0.out, stderr: String(decoding: $0.err, as: UTF8.self))
    }
  }
}
