import NIOCore

/// Whether an event loop answers cache hits itself (`ProxyResponder.hitNow`): while it serves at most
/// `maxConnections` client connections; beyond that its hits are read on the I/O executor, as misses are.
///
/// A hit answered on the loop costs the loop a copy and a CRC of its bytes (about 0.3 ms for 1 MiB) while its
/// other sockets wait, and a saturated loop serves its ready sockets unevenly: measured with 256 connections
/// asking 1 MiB ranges (128 per loop), the loops' sockets held unread requests, and 1-3% of requests waited
/// over a second (some past wrk's 2 s timeout) while the median was 110 ms. The I/O executor's queue is first
/// come, first served. With few connections per loop (up to 32 per loop measured: 64 connections on two) the
/// loop keeps up, and answering there saves the task, two thread wake-ups and a buffer per hit: 1 MiB ranges at
/// 1.18x nginx's requests per second with 64 connections instead of 0.80x, 1.01x with 8 instead of 0.88x
/// (`tools/bench --only serve`; docs/PERFORMANCE.md, Step 10's fourth part).
final class LoopHitPolicy: @unchecked Sendable {
  // Used only on `loop`.
  private let loop: any EventLoop
  private let maxConnections: Int
  private var connections = 0
  /// The targets of the hits the loop answered lately.
  let targets: LoopTargetMemo

  init(loop: any EventLoop, maxConnections: Int) {
    self.loop = loop
    self.maxConnections = maxConnections
    self.targets = LoopTargetMemo(loop: loop)
  }

  /// Whether the loop answers a hit itself now.
  var answersHits: Bool {
    loop.preconditionInEventLoop()
    return connections <= maxConnections
  }

  /// A connection of the loop opened.
  func opened() {
    loop.preconditionInEventLoop()
    connections += 1
  }

  /// A connection of the loop closed.
  func closed() {
    loop.preconditionInEventLoop()
    connections -= 1
  }

  /// One policy per loop of `group`, or none when `maxConnections` is 0 (no loop answers hits).
  static func perLoop(of group: any EventLoopGroup, maxConnections: Int) -> [ObjectIdentifier: LoopHitPolicy]
  {
    guard maxConnections > 0 else { return [:] }
    var policies: [ObjectIdentifier: LoopHitPolicy] = [:]
    for loop in group.makeIterator() {
      policies[ObjectIdentifier(loop)] = LoopHitPolicy(loop: loop, maxConnections: maxConnections)
    }
    return policies
  }
}
