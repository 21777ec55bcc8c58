import NIOCore
import Synchronization

/// A buffer on its way back to its pool, held here alone once NIO is done with it: `take()` moves it out, so
/// that whoever gives it back holds the last reference (a closure that captured the buffer itself would keep one
/// until NIO's event loop releases the closure, after its whole batch of tasks).
final class ReturningBuffer: Sendable {
  private let buffer: Mutex<ByteBuffer?>

  init(_ buffer: ByteBuffer) { self.buffer = Mutex(buffer) }

  /// The buffer, once (nil after).
  func take() -> ByteBuffer? { buffer.withLock { $0.take() } }

  /// On `loop`'s next turn after `written` completed (when the promise completes, NIO's write path still holds
  /// the buffer): the buffer to `body`.
  func giveBack(
    after written: EventLoopFuture<Void>, on loop: any EventLoop,
    to body: @escaping @Sendable (ByteBuffer) -> Void
  ) {
    written.whenComplete { _ in
      loop.execute { if let buffer = self.take() { body(buffer) } }
    }
  }
}
