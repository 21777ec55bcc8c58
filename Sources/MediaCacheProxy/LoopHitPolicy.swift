import NIOCore
import Synchronization

/// Whether an event loop answers cache hits itself (`ProxyResponder.hitNow`): while it serves at most
/// `maxConnections` client connections, or at most twice that while the proxy serves at most `maxConnections`
/// per loop in all; beyond that its hits are read on the I/O executor, as misses are. (Each loop accepts its
/// own connections, `ProxyListeners`, and the kernel spreads them by a hash, not in turn: 64 connections on
/// two loops come as 28 and 36 as often as 32 and 32.)
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
  /// The connections of every loop of the group, and the most they may be for a loop past `maxConnections`
  /// to answer hits.
  private let allConnections: Counter
  private let maxAllConnections: Int
  /// The targets the loop resolved lately (`ProxyResponder.resolvedTarget`).
  let targets: LoopTargetMemo
  /// The heads of the hits the loop answered lately.
  let heads: LoopHitHeads

  /// A count shared by the loops of a group.
  final class Counter: Sendable {
    let value = Atomic(0)
  }

  init(loop: any EventLoop, maxConnections: Int, loops: Int, allConnections: Counter) {
    self.loop = loop
    self.maxConnections = maxConnections
    self.allConnections = allConnections
    self.maxAllConnections = maxConnections * loops
    self.targets = LoopTargetMemo(loop: loop)
    self.heads = LoopHitHeads(loop: loop)
  }

  /// Whether the loop answers a hit itself now.
  var answersHits: Bool {
    loop.preconditionInEventLoop()
    guard connections > maxConnections else { return true }
    return connections <= 2 * maxConnections
      && allConnections.value.load(ordering: .relaxed) <= maxAllConnections
  }

  /// A connection of the loop opened.
  func opened() {
    loop.preconditionInEventLoop()
    connections += 1
    allConnections.value.add(1, ordering: .relaxed)
  }

  /// A connection of the loop closed.
  func closed() {
    loop.preconditionInEventLoop()
    connections -= 1
    allConnections.value.subtract(1, ordering: .relaxed)
  }

  /// One policy per loop of `group`, or none when `maxConnections` is 0 (no loop answers hits).
  static func perLoop(of group: any EventLoopGroup, maxConnections: Int) -> [ObjectIdentifier: LoopHitPolicy]
  {
    guard maxConnections > 0 else { return [:] }
    let loops = Array(group.makeIterator())
    let allConnections = Counter()
    var policies: [ObjectIdentifier: LoopHitPolicy] = [:]
    for loop in loops {
      policies[ObjectIdentifier(loop)] = LoopHitPolicy(
        loop: loop, maxConnections: maxConnections, loops: loops.count, allConnections: allConnections)
    }
    return policies
  }
}
