import Synchronization

/// Body bytes the proxy's responses have handed to NIO and their sockets have not taken yet, summed over every
/// response of a server, with the bound past which a streamed response keeps none of its own waiting
/// (`ProxyServer.Configuration.queuedResponseBytes`).
///
/// Each response's writer (`ProxyBodyWriter`) lets up to `ProxyBodyWriter.maxBytesInFlight` of its writes wait
/// in NIO, so that the socket stays fed while the next piece is read. That is per response: 64 clients that stop
/// reading (paused players, a client process starved of CPU) held ~150 MiB between them, and glibc kept the
/// memory after they were gone. Past this bound a response's write returns only once its own bytes reached the
/// socket, so the next piece is read only then: each such response holds one piece (at most a chunk), and the
/// sum stays about the bound plus a piece per connection. No write waits for another response's socket, and a
/// paused player's bytes cost the others their pipelining. A piece holds no share of the read budget
/// (`CachingReader.Configuration.cacheReadBudget`) once the response has it (`nextOwnedPiece`): until
/// 2026-12-05 it held it while its write waited, and 64 paused players held the whole budget, so that every
/// other response read from the cache waited as long as they stayed paused. A hit
/// answered on its event loop counts too, though it is never paced: it is one write of at most 2 MiB, and a
/// connection's next request waits while its socket is full (`ProxyConnectionHandler`).
final class QueuedBytes: Sendable {
  /// The bound, bytes (0: none).
  let limit: Int
  private let queued = Atomic<Int>(0)

  init(limit: Int) { self.limit = max(0, limit) }

  /// Bytes queued now.
  var count: Int { queued.load(ordering: .relaxed) }

  /// Whether the responses hold more than the bound now.
  var isOver: Bool { limit > 0 && queued.load(ordering: .relaxed) > limit }

  /// Counts `bytes` handed to NIO.
  func add(_ bytes: Int) { queued.add(bytes, ordering: .relaxed) }

  /// Counts `bytes` out: NIO wrote them to the socket, or dropped them with the connection.
  func remove(_ bytes: Int) { queued.subtract(bytes, ordering: .relaxed) }
}
