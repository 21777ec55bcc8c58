import Foundation
import MediaCacheTestSupport
import Synchronization
import SystemPackage
import Testing

@testable import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension FaultTests {
  /// Found by `tools/torture --trials 2500 --parallel 5` (fetch-kill trial 446, seed 20261127): a fetch killed
  /// while it created the cache left the root directory mode 0755, and the restart, finding it there, kept it
  /// (the security scan wants 0700). Foundation's `createDirectory(attributes:)` makes the directory with the
  /// default mode and sets the permissions after; a kill between the two left the default.
  @Suite struct RootMode {
    /// Records the mode of each directory the library makes, right after the `mkdir` (what a kill there leaves).
    final class DirectoryModes: IOFaultHandler {
      let modes = Mutex<[String: mode_t]>([:])
      func before(_ event: IOEvent) throws(Errno) -> (any Sendable)? { nil }
      func after(_ event: IOEvent, context: (any Sendable)?, error: Errno?) {
        guard event.operation == .makeDirectory, error == nil else { return }
        var info = stat()
        guard stat(event.path, &info) == 0 else { return }
        modes.withLock { $0[event.path] = info.st_mode & 0o7777 }
      }
    }

    /// The cache root, and its parent when that is missing too, are 0700 from the moment they exist, whatever
    /// the umask; an existing root keeps its mode.
    @Test func aNewCacheRootIsMode0700FromTheMomentItExists() async throws {
      try await withTemporaryDirectory { directory in
        let root = "\(directory)/parent/cache"
        let recorder = DirectoryModes()
        let previous = umask(0o022)
        defer { umask(previous) }
        _ = try await withIOFaultHandler(recorder) {
          try MediaCache(configuration: .init(directory: FilePath(root)))
        }
        let modes = recorder.modes.withLock { $0 }
        #expect(modes[root] == 0o700, "mode right after mkdir of the root: \(modes)")
        #expect(modes["\(directory)/parent"] == 0o700, "mode right after mkdir of the parent: \(modes)")
      }
    }
  }
}
