import Synchronization
import SystemPackage

/// The kinds of file-system calls a fault hook sees (`IOFaults`).
enum IOOperation: String, Sendable, CaseIterable {
  /// `open`/`openat` of an existing file, or with `O_CREAT` (`IOEvent.creates`).
  case open
  case read
  case write
  /// `fsync` of a file.
  case sync
  /// `fdatasync` of a file.
  case syncData
  case truncate
  /// A hole punched in a file (`fallocate` with `FALLOC_FL_PUNCH_HOLE`): its bytes read as zeros after.
  case deallocate
  case rename
  case link
  case unlink
  case makeDirectory
  case removeDirectory
  /// `fsync` of a directory.
  case syncDirectory
  /// A file's times set (`utimensat`): an object's recency stamp, or the time a trim gives back to its
  /// manifest.
  case touch
}

/// One file-system call as a fault hook sees it.
struct IOEvent: Sendable {
  var operation: IOOperation
  /// The path the call names (the source of a rename or link).
  var path: String
  /// The target of a rename or link.
  var destination: String?
  /// The descriptor a file call uses; for `open`, the new descriptor (in `after` only); -1 otherwise.
  var descriptor: Int32 = -1
  /// Offset and length of a read or write; the new length of a truncate.
  var offset: Int64 = 0
  var length: Int64 = 0
  /// Whether an `open` may create the file.
  var creates = false
}

/// A test's hook into every file-system call the library makes (through `SystemFile` and `FileSystemCalls`).
///
/// `before` runs ahead of the call: throwing an `Errno` fails the call with that errno (it is not made; the
/// caller sees the usual `SystemCallError`). Whatever it returns is handed to `after`, which runs once the call
/// has been made, with its errno if it failed. Both may run on any thread, concurrently.
protocol IOFaultHandler: Sendable {
  func before(_ event: IOEvent) throws(Errno) -> (any Sendable)?
  func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?)
}

/// The fault-injection seam: a process-wide, normally empty hook. Tests (`@testable import MediaCache`) install
/// a handler to fail chosen calls or to record writes for power-loss simulation. With no handler installed each
/// call pays one relaxed atomic load.
enum IOFaults {
  private static let active = Atomic<Bool>(false)
  private static let handler = Mutex<(any IOFaultHandler)?>(nil)

  /// Installs `handler` (nil removes it). Returns the handler it replaced.
  @discardableResult
  static func install(_ newHandler: (any IOFaultHandler)?) -> (any IOFaultHandler)? {
    let old = handler.withLock { current in
      let old = current
      current = newHandler
      return old
    }
    active.store(newHandler != nil, ordering: .releasing)
    return old
  }

  /// Whether a handler is installed.
  @inline(__always)
  static var isActive: Bool { active.load(ordering: .relaxed) }

  /// Runs `body` (a call named `syscall` in errors) between the handler's `before` and `after`.
  static func intercept<T>(
    _ event: IOEvent, syscall: String, resultDescriptor: (T) -> Int32? = { _ in nil }, _ body: () throws -> T
  ) throws -> T {
    guard let hook = handler.withLock({ $0 }) else { return try body() }
    let context: (any Sendable)?
    do { context = try hook.before(event) } catch {
      throw SystemCallError(syscall: syscall, path: event.path, errno: error)
    }
    do {
      let result = try body()
      var done = event
      if let fd = resultDescriptor(result) { done.descriptor = fd }
      hook.after(done, context: context, error: nil)
      return result
    } catch let error as SystemCallError {
      hook.after(event, context: context, error: error.errno)
      throw error
    }
  }
}

/// Runs `body` through the installed fault hook, if any, after the blocking-call check when that is on: the
/// two relaxed loads production code pays.
@inline(__always)
func faultPoint<T>(
  _ event: @autoclosure () -> IOEvent, syscall: String, resultDescriptor: (T) -> Int32? = { _ in nil },
  _ body: () throws -> T
) throws -> T {
  if BlockingCallCheck.isOn { BlockingCallCheck.check(syscall, path: event().path) }
  guard IOFaults.isActive else { return try body() }
  return try IOFaults.intercept(event(), syscall: syscall, resultDescriptor: resultDescriptor, body)
}
