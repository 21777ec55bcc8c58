import Foundation
import Synchronization
import SystemPackage
import Testing

@testable import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One injected failure: which calls it matches and how often it fires.
struct FaultRule: Sendable, CustomStringConvertible {
  var operation: IOOperation
  /// The call's path (or, for a rename or link, either path) must contain this ("" matches any).
  var pathContains: String
  var errno: Errno
  /// Fires from the nth matching call on (1 = the first).
  var nth = 1
  /// Transient rules fire once; persistent ones fire on every matching call from the nth on.
  var persistent = false

  var description: String {
    "\(errno) on \(operation) of *\(pathContains)* from call \(nth)\(persistent ? ", persistent" : ", once")"
  }
}

/// An `IOFaultHandler` that fails the calls its rules match, for paths under `root` only (other tests run in
/// the same process).
final class FaultInjector: IOFaultHandler {
  let root: String
  private struct State {
    var rules: [FaultRule]
    var seen: [Int]
    var fired: [Int]
  }
  private let state: Mutex<State>

  init(root: String, rules: [FaultRule]) {
    self.root = root
    state = Mutex(State(rules: rules, seen: rules.map { _ in 0 }, fired: rules.map { _ in 0 }))
  }

  /// How many times each rule fired.
  var fired: [Int] { state.withLock { $0.fired } }

  func before(_ event: IOEvent) throws(Errno) -> (any Sendable)? {
    guard event.path.hasPrefix(root) else { return nil }
    let failure = state.withLock { state -> Errno? in
      for (index, rule) in state.rules.enumerated() where rule.operation == event.operation {
        guard
          rule.pathContains.isEmpty || event.path.contains(rule.pathContains)
            || (event.destination?.contains(rule.pathContains) ?? false)
        else { continue }
        state.seen[index] += 1
        guard state.seen[index] >= rule.nth, rule.persistent || state.fired[index] == 0 else { continue }
        state.fired[index] += 1
        return rule.errno
      }
      return nil
    }
    if let failure { throw failure }
    return nil
  }

  func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?) {}
}

/// Only one handler can be installed at a time: the suites that install one run one test at a time (they are
/// nested in the serialized `FaultTests`) and always remove it, even when the body throws.
@discardableResult
func withIOFaultHandler<T>(_ handler: any IOFaultHandler, _ body: () async throws -> T) async rethrows -> T {
  IOFaults.install(handler)
  defer { IOFaults.install(nil) }
  return try await body()
}

/// Suites that install a process-wide `IOFaultHandler`; `.serialized` keeps their tests from overlapping.
@Suite(.serialized) struct FaultTests {}

/// The number of trials of the randomized fault suites: `MEDIACACHE_TORTURE_TRIALS`, else `fallback`.
func tortureTrials(default fallback: Int) -> Int {
  ProcessInfo.processInfo.environment["MEDIACACHE_TORTURE_TRIALS"].flatMap { Int($0) } ?? fallback
}

/// The seed of the randomized fault suites: `MEDIACACHE_TORTURE_SEED`, else a fixed one (reproducible).
func tortureSeed() -> UInt64 {
  ProcessInfo.processInfo.environment["MEDIACACHE_TORTURE_SEED"].flatMap { UInt64($0) } ?? 0x5EED_F00D
}

// MARK: Small POSIX helpers for the simulators

/// Device and inode of a path (not following symlinks), nil if nothing is there.
func inodeOf(path: String) -> FileKey? {
  var info = stat()
  guard lstat(path, &info) == 0 else { return nil }
  return FileKey(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
}

/// Device, inode and size behind a descriptor.
func inodeOf(descriptor: Int32) -> (key: FileKey, size: Int64)? {
  var info = stat()
  guard fstat(descriptor, &info) == 0 else { return nil }
  return (FileKey(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)), Int64(info.st_size))
}

struct FileKey: Hashable, Sendable {
  var device: UInt64
  var inode: UInt64
}

/// `pread` of up to `count` bytes at `offset` (fewer at end of file).
func readBytes(descriptor: Int32, offset: Int64, count: Int) -> [UInt8] {
  var bytes = [UInt8](repeating: 0, count: count)
  var done = 0
  while done < count {
    let got = bytes.withUnsafeMutableBytes { raw in
      pread(descriptor, raw.baseAddress! + done, count - done, off_t(offset) + off_t(done))
    }
    if got <= 0 { break }
    done += got
  }
  return Array(bytes[..<done])
}

/// `pwrite` of all of `bytes` at `offset`.
func writeBytes(descriptor: Int32, offset: Int64, _ bytes: [UInt8]) {
  var done = 0
  while done < bytes.count {
    let put = bytes.withUnsafeBytes { raw in
      pwrite(descriptor, raw.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
    }
    if put <= 0 { return }
    done += put
  }
}

/// The directory part of a path.
func parentDirectory(of path: String) -> String {
  guard let slash = path.lastIndex(of: "/") else { return "." }
  return String(path[..<slash])
}
