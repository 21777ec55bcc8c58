import Foundation
import MediaCache
import MediaCacheHTTP
import NIOCore
import Prometheus
import Synchronization

/// The proxy's counters, served at `GET /metrics` in the Prometheus text format (version 0.0.4), emitted by
/// swift-prometheus from the server's `registry`.
///
/// Each server creates its counters and gauges on its own registry (`ProxyServer.Configuration.metricsRegistry`,
/// or a new one): servers in one process do not share them, and nothing global is needed. The libraries'
/// metrics (`CacheMetrics`, `ReaderMetrics`) go through swift-metrics instead; `bootstrapGlobal(_:)` makes a
/// registry their backend, so that given to the server too they appear on its `/metrics` beside its own.
///
/// A hit answered on an event loop is counted just after its response is handed to NIO, in the same
/// turn of the loop (off its time to first byte): the accessors below may lag such a response by that
/// moment, `countsSettled()` waits it out, and `render()` waits for it.
public final class ProxyMetrics: Sendable {
  private let cache: MediaCache
  /// The registry `/metrics` emits: the server's counters, and whatever else was created on it (the
  /// libraries' metrics when it is the process's swift-metrics backend, `bootstrapGlobal(_:)`).
  public let registry: PrometheusCollectorRegistry
  private let requestsByClass = Mutex<[Int64]>(Array(repeating: 0, count: 5))  // 1xx ... 5xx
  private let cacheBytes = Atomic<Int64>(0)
  private let originBytes = Atomic<Int64>(0)
  private let hits = Atomic<Int64>(0)
  private let misses = Atomic<Int64>(0)
  private let loopHits = Atomic<Int64>(0)
  private let originErrors = Atomic<Int64>(0)
  private let reopened = Atomic<Int64>(0)
  private let activeResponses = Atomic<Int64>(0)
  /// Responses being streamed now.
  var responsesActive: Int64 { activeResponses.load(ordering: .relaxed) }
  private let preloaded = Atomic<Int64>(0)
  /// What became of the preloader's bytes (served later, evicted unplayed).
  public let preloadLedger = PreloadLedger()
  /// The registry's metrics that the proxy updates as it answers (the values above are kept for the
  /// dashboard and the accessors; a Prometheus counter cannot be read back).
  private let exported: Exported

  /// A scan of the cache tree is a walk of every shard, so `/metrics` and the dashboard reuse one for a few
  /// seconds.
  private struct RecentScan { var objects: [ScannedObject]; var taken: Date }
  private let scanned = Mutex<RecentScan?>(nil)
  static let totalsMaxAge: TimeInterval = 2
  /// The event loops of the server while it serves and its loops answer hits (`countsSettled()`).
  private let hitLoops = Mutex<[any EventLoop]>([])

  init(cache: MediaCache, registry: PrometheusCollectorRegistry) {
    self.cache = cache
    self.registry = registry
    self.exported = Exported(registry)
  }

  /// Requests answered so far with a status in `100 * statusClass ..< 100 * (statusClass + 1)`.
  public func requests(statusClass: Int) -> Int64 {
    guard (1...5).contains(statusClass) else { return 0 }
    return requestsByClass.withLock { $0[statusClass - 1] }
  }
  /// Body bytes served that were read from the cache's files.
  public var bytesFromCache: Int64 { cacheBytes.load(ordering: .relaxed) }
  /// Body bytes served straight from origin responses.
  public var bytesFromOrigin: Int64 { originBytes.load(ordering: .relaxed) }
  /// GET responses whose body came entirely from the cache.
  public var cacheHits: Int64 { hits.load(ordering: .relaxed) }
  /// Cache hits answered on the connection's event loop, their bytes read from the page cache without waiting
  /// for the disk (the others among `cacheHits` were read on the I/O executor: not all in memory, a range of
  /// more than 2 MiB or whole chunks of more than 4 MiB to verify, the object not open, or the loop serving more
  /// than `ProxyServer.Configuration.loopHitConnections` connections).
  public var cacheHitsOnLoop: Int64 { loopHits.load(ordering: .relaxed) }
  /// GET responses that needed bytes from the origin.
  public var cacheMisses: Int64 { misses.load(ordering: .relaxed) }
  /// Bytes the preloader (`PUT /preload`) fetched from origins.
  public var bytesPreloaded: Int64 { preloaded.load(ordering: .relaxed) }
  /// Requests that failed because of the origin (answered 4xx/5xx from an `OriginError`).
  public var originFailures: Int64 { originErrors.load(ordering: .relaxed) }
  /// Reads opened again because the object moved to another version between the response's head being made
  /// and its first byte (another process replaced or removed it, or the origin's changed).
  public var readsReopened: Int64 { reopened.load(ordering: .relaxed) }

  /// While the server serves: the loops that answer hits, whose counts `countsSettled()` waits for.
  func setHitLoops(_ loops: [any EventLoop]) {
    hitLoops.withLock { $0 = loops }
  }

  /// Waits until each event loop answering hits has finished the turn it is in. A hit answered on a loop is
  /// counted just after its response is handed to NIO, in the same turn, so the accessors may lag a client
  /// that already has its first byte by that moment; after this returns they count every such hit. (Other
  /// responses are counted before their bytes go out; a streamed one counts as a hit or a miss at its first
  /// origin byte or once its body is written.) Returns at once while the server is not serving or its loops
  /// answer no hits. `render()` and the dashboard call it first.
  public func countsSettled() async {
    // Submitted under the lock: once the server has cleared its loops (before it shuts them down), nothing is
    // submitted to a loop that may be gone (NIO drops such a task, and its future would never complete).
    let turns = hitLoops.withLock { loops in loops.map { $0.submit {} } }
    for turn in turns { try? await turn.get() }
  }

  func noteStatus(_ code: Int) {
    let index = code / 100 - 1
    let counted = requestsByClass.withLock { counts in
      guard counts.indices.contains(index) else { return false }
      counts[index] += 1
      return true
    }
    if counted { exported.requests[index].increment() }
  }

  func notePreloaded(_ bytes: Int64) {
    preloaded.add(bytes, ordering: .relaxed)
    if bytes > 0 { exported.preloadFetched.increment(by: bytes) }
  }

  /// A player was served `range` of object `id` (settles preloaded bytes).
  func noteServed(_ id: ObjectID, _ range: Range<Int64>) { preloadLedger.noteServed(id, range) }

  func noteServed(fromCache: Int64, fromOrigin: Int64) {
    if fromCache > 0 {
      cacheBytes.add(fromCache, ordering: .relaxed)
      exported.servedFromCache.increment(by: fromCache)
    }
    if fromOrigin > 0 {
      originBytes.add(fromOrigin, ordering: .relaxed)
      exported.servedFromOrigin.increment(by: fromOrigin)
    }
  }

  func noteRequest(hit: Bool) {
    if hit {
      hits.add(1, ordering: .relaxed)
      exported.hits.increment()
    } else {
      misses.add(1, ordering: .relaxed)
      exported.misses.increment()
    }
  }

  func noteHitOnLoop() {
    loopHits.add(1, ordering: .relaxed)
    exported.loopHits.increment()
  }
  func noteOriginError() {
    originErrors.add(1, ordering: .relaxed)
    exported.originErrors.increment()
  }
  func noteReopenedRead() {
    reopened.add(1, ordering: .relaxed)
    exported.reopened.increment()
  }
  func responseStarted() { activeResponses.add(1, ordering: .relaxed) }
  func responseEnded() { activeResponses.subtract(1, ordering: .relaxed) }

  /// The cache's totals, walked on the I/O executor at most every `totalsMaxAge`.
  /// The cache's objects as a walk found them at most `totalsMaxAge` seconds ago (nil if the walk failed).
  func recentScan() async -> [ScannedObject]? {
    if let recent = scanned.withLock({ $0 }), Date().timeIntervalSince(recent.taken) < Self.totalsMaxAge {
      return recent.objects
    }
    let store = cache.store
    guard let objects = try? await IOExecutor.shared.run({ try store.scanObjects() }) else { return nil }
    scanned.withLock { $0 = RecentScan(objects: objects, taken: Date()) }
    return objects
  }

  /// The Prometheus text exposition of the registry: the proxy's counters, its gauges set now (the hit
  /// ratio, responses streaming, preloaded bytes not played yet, the cache's objects and bytes from a walk at
  /// most `totalsMaxAge` old), and whatever else is on the registry (the libraries' metrics when it is the
  /// process's swift-metrics backend). Only a walk that succeeded sets the cache's gauges: they are absent
  /// until one has, and keep the last one's values when a later walk fails. The counts include every hit
  /// answered on an event loop whose first byte a client had when this was called (`countsSettled()`).
  public func render() async -> String {
    await countsSettled()
    let served = bytesFromCache + bytesFromOrigin
    exported.hitRatio.set(to: served == 0 ? 0 : Double(bytesFromCache) / Double(served))
    exported.activeResponses.set(to: Double(activeResponses.load(ordering: .relaxed)))
    exported.settle(preloadLedger.totals)
    if let objects = await recentScan() {
      let gauges = exported.cacheGauges()
      gauges.objects.set(to: Double(objects.count))
      gauges.bytes.set(to: Double(objects.reduce(Int64(0)) { $0 + $1.diskBytes }))
    }
    var buffer: [UInt8] = []
    registry.emit(into: &buffer)
    return String(decoding: buffer, as: UTF8.self)
  }

  /// The proxy's metrics on its registry. Names, types and help as the hand-written exposition had them
  /// (docs/REPORTS.md, "Metrics").
  private final class Exported: Sendable {
    let registry: PrometheusCollectorRegistry
    let requests: [Prometheus.Counter]
    let servedFromCache: Prometheus.Counter
    let servedFromOrigin: Prometheus.Counter
    let hits: Prometheus.Counter
    let loopHits: Prometheus.Counter
    let misses: Prometheus.Counter
    let hitRatio: Prometheus.Gauge
    let originErrors: Prometheus.Counter
    let reopened: Prometheus.Counter
    let preloadFetched: Prometheus.Counter
    let preloadServed: Prometheus.Counter
    let preloadEvicted: Prometheus.Counter
    let preloadUnplayed: Prometheus.Gauge
    let activeResponses: Prometheus.Gauge
    /// The ledger's totals last added to `preloadServed` and `preloadEvicted` (counters only go up by deltas).
    private let settled = Mutex<(served: Int64, evicted: Int64)>((0, 0))
    private let cache = Mutex<(objects: Prometheus.Gauge, bytes: Prometheus.Gauge)?>(nil)

    init(_ registry: PrometheusCollectorRegistry) {
      self.registry = registry
      func counter(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Prometheus.Counter {
        registry.makeCounter(descriptor: .init(name, help: help), labels: labels)
      }
      requests = (1...5).map {
        counter(
          "mediacache_proxy_requests_total", "Requests answered, by status class.", [("code", "\($0)xx")])
      }
      let served = "Body bytes served, by where they came from."
      servedFromCache = counter("mediacache_proxy_served_bytes_total", served, [("source", "cache")])
      servedFromOrigin = counter("mediacache_proxy_served_bytes_total", served, [("source", "origin")])
      hits = counter("mediacache_proxy_cache_hits_total", "GET responses served entirely from the cache.")
      loopHits = counter(
        "mediacache_proxy_cache_hits_on_loop_total",
        "Cache hits answered on an event loop from the page cache, without waiting for the disk.")
      misses = counter(
        "mediacache_proxy_cache_misses_total", "GET responses that needed bytes from the origin.")
      hitRatio = registry.makeGauge(
        descriptor: .init(
          "mediacache_proxy_hit_ratio", help: "Share of served body bytes that came from the cache."))
      originErrors = counter(
        "mediacache_proxy_origin_errors_total", "Requests that failed because of the origin.")
      reopened = counter(
        "mediacache_proxy_reads_reopened_total",
        "Reads opened again because the object changed version before the response's first byte.")
      preloadFetched = counter(
        "mediacache_preload_fetched_bytes_total", "Bytes the preloader fetched from origins.")
      preloadServed = counter(
        "mediacache_preload_served_bytes_total",
        "Preloaded bytes later served to a player (each byte counted once).")
      preloadEvicted = counter(
        "mediacache_preload_evicted_unplayed_bytes_total",
        "Preloaded bytes evicted (or cut off with a tail) before a player was served them.")
      preloadUnplayed = registry.makeGauge(
        descriptor: .init(
          "mediacache_preload_unplayed_bytes",
          help: "Preloaded bytes still cached that no player has been served yet."))
      activeResponses = registry.makeGauge(
        descriptor: .init("mediacache_proxy_active_responses", help: "Responses being streamed now."))
    }

    /// Brings the preload counters up to the ledger's `totals` and sets its unplayed bytes.
    func settle(_ totals: PreloadLedger.Totals) {
      settled.withLock { settled in
        if totals.servedAfterPreload > settled.served {
          preloadServed.increment(by: totals.servedAfterPreload - settled.served)
          settled.served = totals.servedAfterPreload
        }
        if totals.evictedUnplayed > settled.evicted {
          preloadEvicted.increment(by: totals.evictedUnplayed - settled.evicted)
          settled.evicted = totals.evictedUnplayed
        }
      }
      preloadUnplayed.set(to: Double(totals.unplayed))
    }

    /// The gauges of the cache's objects and bytes on disk, created on the first walk that succeeded.
    func cacheGauges() -> (objects: Prometheus.Gauge, bytes: Prometheus.Gauge) {
      cache.withLock { gauges in
        if let gauges { return gauges }
        let made = (
          objects: registry.makeGauge(
            descriptor: .init(
              "mediacache_cache_objects",
              help: "Objects in the cache directory (refreshed every 2 s at most).")),
          bytes: registry.makeGauge(
            descriptor: .init(
              "mediacache_cache_bytes",
              help: "Bytes on disk of the cache's objects (refreshed every 2 s at most)."))
        )
        gauges = made
        return made
      }
    }
  }
}
