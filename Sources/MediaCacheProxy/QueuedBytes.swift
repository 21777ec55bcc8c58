import MediaCacheHTTP
import Synchronization

/// Body bytes the proxy's responses have handed to NIO and their sockets have not taken yet, summed over every
/// response of a server, with the bound past which a streamed response keeps none of its own waiting
/// (`ProxyServer.Configuration.queuedResponseBytes`).
///
/// Each response's writer (`ProxyBodyWriter`) lets up to `ProxyBodyWriter.maxBytesInFlight` of its writes wait
/// in NIO, so that the socket stays fed while the next piece is read. That is per response: 64 clients that stop
/// reading (paused players, a client process starved of CPU) held ~150 MiB between them, and glibc kept the
/// memory after they were gone. Past this bound a response's write returns only once its own bytes reached the
/// socket, so the next piece is read only then, and it is `smallPiece` (`PieceSizing`): the sum stays about the
/// bound plus 32 KiB per streamed response. No write waits for another response's socket, and a
/// paused player's bytes cost the others their pipelining. A piece holds no share of the read budget
/// (`CachingReader.Configuration.cacheReadBudget`) once the response has it (`nextOwnedPiece`): until
/// 2026-12-05 it held it while its write waited, and 64 paused players held the whole budget, so that every
/// other response read from the cache waited as long as they stayed paused. A hit
/// answered on its event loop counts too, though it is never paced: it is one write of at most 2 MiB, and a
/// connection's next request waits while its socket is full (`ProxyConnectionHandler`).
final class QueuedBytes: PieceSizing {
  /// The bound, bytes (0: none).
  let limit: Int
  /// The largest piece a response reads once a whole one would pass the bound: what one whose client stopped
  /// reading keeps waiting then (its piece's buffer) is this, not a chunk. Two verification blocks of the
  /// cache's format. Measured against 16 and 64 KiB (and against a share of the bound per streamed response)
  /// with 64 and 256 clients streaming a cached object and 256 that stop reading: docs/PERFORMANCE.md.
  static let smallPiece = 32 << 10
  private let queued = Atomic<Int>(0)

  init(limit: Int) { self.limit = max(0, limit) }

  /// Bytes queued now.
  var count: Int { queued.load(ordering: .relaxed) }

  /// Whether the responses hold more than the bound now.
  var isOver: Bool { limit > 0 && queued.load(ordering: .relaxed) > limit }

  /// Counts `bytes` handed to NIO (or held for it: a response's first piece, `PieceSource`).
  func add(_ bytes: Int) { queued.add(bytes, ordering: .relaxed) }

  /// Counts `bytes` out: NIO wrote them to the socket, or dropped them with the connection.
  func remove(_ bytes: Int) { queued.subtract(bytes, ordering: .relaxed) }

  /// The largest piece of bytes not read from the cache (an origin's, a flight's): a chunk's worth, or
  /// `smallPiece` while the responses hold more than their bound.
  var pieceLimit: Int { isOver ? Self.smallPiece : .max }

  /// Counts a read from the cache before it runs: what it wants (at most the bound, so that a read on an idle
  /// server always may) while that keeps the sum within the bound, else `smallPiece`. Counted only once read,
  /// the pieces of many responses reading at once (256 clients streaming) would each see the bound far off and
  /// be a whole chunk: measured, 99–104 MiB peak against 85–92.
  func reserveRead(wanted: Int) -> (atMost: Int, reserved: Int) {
    guard limit > 0 else { return (.max, 0) }
    let whole = max(1, min(wanted, limit))
    if queued.add(whole, ordering: .relaxed).newValue <= limit || whole <= Self.smallPiece {
      return (whole, whole)
    }
    queued.subtract(whole - Self.smallPiece, ordering: .relaxed)
    return (Self.smallPiece, Self.smallPiece)
  }

  func release(_ reserved: Int) { remove(reserved) }
}
