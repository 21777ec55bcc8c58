import NIOCore
import NIOPosix

/// Runs `body` on the event loop of a new group of one, and shuts the group down after: for the types that
/// live on one loop and check that they are used there.
func onALoop(_ body: @escaping @Sendable (any EventLoop) throws -> Void) throws {
  let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
  defer { try? group.syncShutdownGracefully() }
  let loop = group.next()
  try loop.submit { try body(loop) }.wait()
}
