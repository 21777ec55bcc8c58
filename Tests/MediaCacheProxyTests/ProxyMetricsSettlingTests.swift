import MediaCache
import MediaCacheTestSupport
import NIOCore
import NIOPosix
import Prometheus
import Synchronization
import SystemPackage
import Testing

@testable import MediaCacheProxy

/// `ProxyMetrics.countsSettled()`: a loop hit is counted in the turn of its event loop that wrote it, and this
/// waits for the turn each of the server's loops is in.
struct ProxyMetricsSettlingTests {
  @Test func theWaitCoversATurnInProgressAndEndsOnceTheLoopsAreLetGo() async throws {
    try await withTemporaryDirectory { directory in
      let cache = try MediaCache(configuration: .init(directory: FilePath("\(directory)/cache")))
      let metrics = ProxyMetrics(cache: cache, registry: PrometheusCollectorRegistry())
      let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
      let loops = Array(group.makeIterator())
      metrics.setHitLoops(loops)
      // A turn of the second loop in progress, which counts (as a loop hit does after its write) only once the
      // test lets it end.
      let turn = Turn()
      loops[1].execute {
        turn.started.store(true, ordering: .releasing)
        let deadline = ContinuousClock.now + .seconds(10)
        while !turn.released.load(ordering: .acquiring) && ContinuousClock.now < deadline {}
        metrics.noteHitOnLoop()
      }
      while !turn.started.load(ordering: .acquiring) { await Task.yield() }
      let settling = Task { () -> Int64 in
        await metrics.countsSettled()
        return metrics.cacheHitsOnLoop
      }
      try await Task.sleep(for: .milliseconds(200))
      turn.released.store(true, ordering: .releasing)
      #expect(await settling.value == 1, "the count made in the turn in progress")
      // The server lets go of its loops before it shuts them down: a wait after that returns at once, without
      // submitting to loops that are gone.
      metrics.setHitLoops([])
      try await group.shutdownGracefully()
      await metrics.countsSettled()
      #expect(metrics.cacheHitsOnLoop == 1)
    }
  }
}

/// A loop's turn the test holds: started, and let go.
private final class Turn: Sendable {
  let started = Atomic(false)
  let released = Atomic(false)
}
