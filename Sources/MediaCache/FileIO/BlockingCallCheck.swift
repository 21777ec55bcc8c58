import Foundation
import Synchronization

/// Where a blocking file-system call of the library was made (see `BlockingCallCheck`).
package enum BlockingCallContext: Sendable, Equatable {
  /// On a thread of an `IOExecutor`: where blocking calls belong.
  case ioExecutor
  /// In a Swift task outside an `IOExecutor`: on the cooperative pool (or the main actor), which every task
  /// shares.
  case task
  /// On a thread the installed test calls forbidden (the read engine installs "is a SwiftNIO event loop").
  case forbiddenThread
  /// On a thread of its own (a synchronous tool's main thread, a test's thread, the commit queue).
  case otherThread

  /// Whether a blocking call may be made here.
  package var allowsBlocking: Bool { self == .ioExecutor || self == .otherThread }
}

/// A check that the blocking file-system calls of the library (open, pread, pwrite, fsync, rename, unlink,
/// utimensat, …: the calls of `SystemFile` and `FileSystemCalls` that may wait for the disk, checked by the
/// fault-injection seam or on their own, as `lstat`, `flock` and a directory's `open` are) run where blocking
/// is allowed: on an `IOExecutor` thread or a thread of its own, never in a Swift task on the cooperative
/// pool nor on an event loop. Not checked: `close`, and the few reads made through Foundation (the cache's
/// `FORMAT` marker, the compactor's cursor), each made right after a checked call in the same place.
///
/// Off by default (one relaxed atomic load per call). `MEDIACACHE_BLOCKING_CHECK=log` in the environment prints
/// each call made in the wrong place to standard error (the first 50) and counts them; `=trap` stops the
/// process at the first, naming the call, its path and the place. The proxy's tests run it with `trap` under
/// concurrent players.
package enum BlockingCallCheck {
  /// What the check does with a call in the wrong place.
  package enum Mode: Int, Sendable {
    /// `off` (the default): nothing is checked; `log` (`MEDIACACHE_BLOCKING_CHECK=log`): each call in the wrong
    /// place is counted in `violations` and the first 50 are printed to standard error; `trap` (`=trap`): the
    /// process stops at the first, with a message naming the call, its path and the place.
    case off, log, trap
  }

  private static let modeValue = Atomic<Int>(modeFromEnvironment().rawValue)
  private static let violationCount = Atomic<Int>(0)
  private static let forbiddenThreadTest = Mutex<(@Sendable () -> Bool)?>(nil)

  private static func modeFromEnvironment() -> Mode {
    switch ProcessInfo.processInfo.environment["MEDIACACHE_BLOCKING_CHECK"] {
    case "log": .log
    case "trap": .trap
    default: .off
    }
  }

  /// The current mode (from `MEDIACACHE_BLOCKING_CHECK` at first use, unless set).
  package static var mode: Mode {
    get { Mode(rawValue: modeValue.load(ordering: .relaxed)) ?? .off }
    set { modeValue.store(newValue.rawValue, ordering: .relaxed) }
  }

  @inline(__always)
  static var isOn: Bool { modeValue.load(ordering: .relaxed) != 0 }

  /// Calls made in the wrong place so far (in `log` mode).
  package static var violations: Int { violationCount.load(ordering: .relaxed) }

  /// Installs the test for threads where no blocking call may run, such as "the current thread is an event
  /// loop" (the core does not know SwiftNIO; the read engine installs it).
  package static func setForbiddenThreadTest(_ test: @escaping @Sendable () -> Bool) {
    forbiddenThreadTest.withLock { $0 = test }
  }

  /// Where a call made now would be made.
  package static var currentContext: BlockingCallContext {
    if IOExecutor.isCurrentThreadIO { return .ioExecutor }
    if withUnsafeCurrentTask(body: { $0 != nil }) { return .task }
    if let test = forbiddenThreadTest.withLock({ $0 }), test() { return .forbiddenThread }
    return .otherThread
  }

  /// Checks a call about to be made.
  static func check(_ syscall: String, path: @autoclosure () -> String) {
    let context = currentContext
    guard !context.allowsBlocking else { return }
    let place = context == .task ? "a Swift task (the cooperative pool)" : "an event loop"
    let line =
      "mediacache: blocking call \(syscall) on \(path()) in \(place), thread \(Thread.current.name ?? "?")"
    if mode == .trap { fatalError(line) }
    let count = violationCount.add(1, ordering: .relaxed).newValue
    if count <= 50 { FileHandle.standardError.write(Data((line + "\n").utf8)) }
  }
}
