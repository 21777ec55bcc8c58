import Foundation
import HTTPTypes
import MediaCacheHTTP
import NIOCore
import NIOHTTP1
import Synchronization

/// A response: status, headers and a body that is empty, in memory, or written by a closure.
struct ProxyResponse: Sendable {
  var status: HTTPResponse.Status
  var headers: HTTPFields
  var body: Body
  /// What the body served, for the access log (nil: not an object's bytes).
  var access: AccessRecord? = nil

  enum Body: Sendable {
    case empty
    case bytes(ByteBuffer)
    /// Writes the body through the writer; a throw cuts the connection (the status is already sent).
    case stream(@Sendable (ProxyBodyWriter) async throws -> Void)
    /// A hit read at once from the cache: one buffer sent with the end of the response.
    case hit(HitBody)
  }
}

/// Writes one response to a channel, from the task answering it. The head goes out with the first body
/// bytes (one flush for both), and the end with the last ones when the body knows which they are. Once more
/// than `maxBytesInFlight` bytes wait in NIO, a write waits for the oldest to reach the socket, so a slow
/// client sets the pace and the memory per response stays bounded; while all responses together hold more than
/// their bound (`QueuedBytes`), a write waits for all of its response's bytes to reach the socket.
final class ProxyBodyWriter: @unchecked Sendable {
  // Used only by the task answering the request.
  private let channel: any Channel
  /// What every response of the server has queued in NIO (this one's writes count in it until NIO is done).
  let queued: QueuedBytes
  private var head: HTTPResponseHead?
  /// Writes not yet known to have reached the socket, oldest first, with their sizes.
  private var inFlight: [(future: EventLoopFuture<Void>, bytes: Int)] = []
  private var bytesInFlight = 0
  private var ended = false
  /// Body bytes handed to NIO so far (for the access log).
  private(set) var bodyBytes = 0
  /// Whether the head was handed to NIO (it goes with the first body bytes, or the end).
  var headSent: Bool { head == nil }
  /// The write that ended the response.
  private var last: EventLoopFuture<Void>?
  /// Bytes handed to NIO and not yet written to the socket before a write waits: two cache chunks, or the many
  /// small buffers of an origin response, without a wait per buffer.
  static let maxBytesInFlight = 2 << 20

  /// The connection's event loop.
  var eventLoop: any EventLoop { channel.eventLoop }

  init(channel: any Channel, head: HTTPResponseHead, queued: QueuedBytes) {
    self.channel = channel
    self.head = head
    self.queued = queued
  }

  func write(_ buffer: ByteBuffer, endingResponse: Bool = false) async throws {
    try await write(contentsOf: CollectionOfOne(buffer), endingResponse: endingResponse)
  }

  /// Hands `buffer` to NIO without waiting (the end of the response with it if `endingResponse`), and hands it
  /// to `recycle` once NIO is done with it (written to the socket, or dropped with the connection), not before:
  /// a pool reusing it then writes into storage nothing else holds. Returns the future of the write, or nil when
  /// there was nothing to send (then `recycle` has run).
  @discardableResult
  func writeNow(
    _ buffer: ByteBuffer, endingResponse: Bool, recycle: @escaping @Sendable (ByteBuffer) -> Void
  ) -> EventLoopFuture<Void>? {
    guard let written = enqueue(CollectionOfOne(buffer), endingResponse: endingResponse) else {
      recycle(buffer)
      return nil
    }
    // Given back on the loop's next turn (when the write's promise completes, NIO's write path still holds the
    // buffer), by a closure that holds no copy of it: the pool's next read into a buffer held elsewhere would
    // copy it to a new allocation.
    ReturningBuffer(buffer).giveBack(after: written, on: channel.eventLoop, to: recycle)
    return written
  }

  /// Writes a piece of an object, paced as `write(_:endingResponse:)` is: a buffer read from the cache (handed to
  /// `recycle` once NIO is done with it, as `writeNow` does) or an origin response's buffers. The piece is taken
  /// over and let go before the wait for the socket, so that NIO holds the last reference to the buffer.
  func write(
    _ piece: consuming CachedPiece, endingResponse: Bool, recycle: @escaping @Sendable (ByteBuffer) -> Void
  ) async throws {
    let size = piece.count
    let written: EventLoopFuture<Void>?
    switch consume piece {
    case .disk(let buffer): written = writeNow(buffer, endingResponse: endingResponse, recycle: recycle)
    case .origin(let buffers): written = enqueue(buffers, endingResponse: endingResponse)
    }
    guard let written else { return }
    try await pace(written, bytes: size)
  }

  /// Writes the buffers with one flush, and the end of the response with them if `endingResponse`.
  func write(contentsOf buffers: some Collection<ByteBuffer>, endingResponse: Bool = false) async throws {
    guard let written = enqueue(buffers, endingResponse: endingResponse) else { return }
    try await pace(written, bytes: buffers.reduce(0) { $0 + $1.readableBytes })
  }

  /// Hands the buffers (and the head before them, the end after them) to NIO with one flush; returns the
  /// future of the last part, or nil when there was nothing to send.
  private func enqueue(_ buffers: some Collection<ByteBuffer>, endingResponse: Bool) -> EventLoopFuture<Void>?
  {
    precondition(!ended, "a write after the end of the response")
    var parts: [HTTPServerResponsePart] = []
    parts.reserveCapacity(buffers.count + 2)
    if let head {
      parts.append(.head(head))
      self.head = nil
    }
    var count = 0
    for buffer in buffers where buffer.readableBytes > 0 {
      parts.append(.body(.byteBuffer(buffer)))
      count += buffer.readableBytes
    }
    bodyBytes += count
    if endingResponse {
      parts.append(.end(nil))
      ended = true
    }
    if parts.isEmpty { return nil }
    let written = send(parts)
    if count > 0 {
      queued.add(count)
      written.whenComplete { [queued, count] _ in queued.remove(count) }
    }
    if ended { last = written }
    return written
  }

  /// Notes a write of `size` bytes in flight, then waits while more than `maxBytesInFlight` are, or while any
  /// is and the server's responses hold more than their bound (the oldest first). The write that ended the
  /// response is not waited for (`finish` returns it).
  private func pace(_ written: EventLoopFuture<Void>, bytes size: Int) async throws {
    if ended { return }
    inFlight.append((written, size))
    bytesInFlight += size
    while bytesInFlight > Self.maxBytesInFlight || queued.isOver, !inFlight.isEmpty {
      let (oldest, size) = inFlight.removeFirst()
      bytesInFlight -= size
      try await oldest.get()
    }
  }

  /// Ends the response unless a write did: sends the head if nothing was written, then the end. The future
  /// completes once all of the response has reached the socket.
  func finish() -> EventLoopFuture<Void> {
    inFlight = []
    bytesInFlight = 0
    if let last { return last }
    var parts: [HTTPServerResponsePart] = []
    if let head {
      parts.append(.head(head))
      self.head = nil
    }
    parts.append(.end(nil))
    ended = true
    let written = send(parts)
    last = written
    return written
  }

  private func send(_ parts: [HTTPServerResponsePart]) -> EventLoopFuture<Void> {
    let channel = self.channel
    let promise = channel.eventLoop.makePromise(of: Void.self)
    let write: @Sendable () -> Void = {
      for (index, part) in parts.enumerated() {
        channel.write(part, promise: index == parts.count - 1 ? promise : nil)
      }
      channel.flush()
    }
    if channel.eventLoop.inEventLoop { write() } else { channel.eventLoop.execute(write) }
    return promise.futureResult
  }
}
