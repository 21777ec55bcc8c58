import NIOCore
import NIOPosix

/// Threads for the file-system calls of the read engine that have no asynchronous form (creating and opening an
/// object's files), so they run neither on an event loop nor on Swift's cooperative pool: there, 32 players
/// opening 32 cold objects at once would occupy the pool's few threads (one per core) and hold up every other
/// task's progress, origin requests included, for the length of all the opens.
enum BlockingIO {
  /// More threads than cores: the calls wait on the disk rather than compute.
  static let pool: NIOThreadPool = {
    let pool = NIOThreadPool(numberOfThreads: max(4, System.coreCount))
    pool.start()
    return pool
  }()

  /// Runs `body` on the pool and returns its result.
  static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await pool.runIfActive(body)
  }
}
