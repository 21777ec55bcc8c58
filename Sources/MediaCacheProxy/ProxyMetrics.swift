import Foundation
import MediaCache
import MediaCacheHTTP
import Synchronization

/// The proxy's counters, served at `GET /metrics` in the Prometheus text format (version 0.0.4).
public final class ProxyMetrics: Sendable {
  private let cache: MediaCache
  private let requestsByClass = Mutex<[Int64]>(Array(repeating: 0, count: 5))  // 1xx ... 5xx
  private let cacheBytes = Atomic<Int64>(0)
  private let originBytes = Atomic<Int64>(0)
  private let hits = Atomic<Int64>(0)
  private let misses = Atomic<Int64>(0)
  private let loopHits = Atomic<Int64>(0)
  private let originErrors = Atomic<Int64>(0)
  private let activeResponses = Atomic<Int64>(0)
  /// Responses being streamed now.
  var responsesActive: Int64 { activeResponses.load(ordering: .relaxed) }
  private let preloaded = Atomic<Int64>(0)
  /// What became of the preloader's bytes (served later, evicted unplayed).
  public let preloadLedger = PreloadLedger()

  /// A scan of the cache tree is a walk of every shard, so `/metrics` and the dashboard reuse one for a few
  /// seconds.
  private struct RecentScan { var objects: [ScannedObject]; var taken: Date }
  private let scanned = Mutex<RecentScan?>(nil)
  static let totalsMaxAge: TimeInterval = 2

  init(cache: MediaCache) {
    self.cache = cache
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

  func noteStatus(_ code: Int) {
    let index = code / 100 - 1
    requestsByClass.withLock { counts in
      if counts.indices.contains(index) { counts[index] += 1 }
    }
  }

  func notePreloaded(_ bytes: Int64) { preloaded.add(bytes, ordering: .relaxed) }

  /// A player was served `range` of object `id` (settles preloaded bytes).
  func noteServed(_ id: ObjectID, _ range: Range<Int64>) { preloadLedger.noteServed(id, range) }

  func noteServed(fromCache: Int64, fromOrigin: Int64) {
    if fromCache != 0 { cacheBytes.add(fromCache, ordering: .relaxed) }
    if fromOrigin != 0 { originBytes.add(fromOrigin, ordering: .relaxed) }
  }

  func noteRequest(hit: Bool) {
    if hit {
      hits.add(1, ordering: .relaxed)
    } else {
      misses.add(1, ordering: .relaxed)
    }
  }

  func noteHitOnLoop() { loopHits.add(1, ordering: .relaxed) }
  func noteOriginError() { originErrors.add(1, ordering: .relaxed) }
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

  /// The Prometheus text exposition of every counter.
  public func render() async -> String {
    var out = ""
    func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
      out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
      for (labels, value) in samples { out += "\(name)\(labels) \(value)\n" }
    }
    metric(
      "mediacache_proxy_requests_total", "counter", "Requests answered, by status class.",
      (1...5).map { ("{code=\"\($0)xx\"}", "\(requests(statusClass: $0))") })
    metric(
      "mediacache_proxy_served_bytes_total", "counter", "Body bytes served, by where they came from.",
      [("{source=\"cache\"}", "\(bytesFromCache)"), ("{source=\"origin\"}", "\(bytesFromOrigin)")])
    metric(
      "mediacache_proxy_cache_hits_total", "counter", "GET responses served entirely from the cache.",
      [("", "\(cacheHits)")])
    metric(
      "mediacache_proxy_cache_hits_on_loop_total", "counter",
      "Cache hits answered on an event loop from the page cache, without waiting for the disk.",
      [("", "\(cacheHitsOnLoop)")])
    metric(
      "mediacache_proxy_cache_misses_total", "counter", "GET responses that needed bytes from the origin.",
      [("", "\(cacheMisses)")])
    let served = bytesFromCache + bytesFromOrigin
    let ratio = served == 0 ? 0 : Double(bytesFromCache) / Double(served)
    metric(
      "mediacache_proxy_hit_ratio", "gauge", "Share of served body bytes that came from the cache.",
      [("", String(format: "%.6f", ratio))])
    metric(
      "mediacache_proxy_origin_errors_total", "counter", "Requests that failed because of the origin.",
      [("", "\(originFailures)")])
    metric(
      "mediacache_preload_fetched_bytes_total", "counter", "Bytes the preloader fetched from origins.",
      [("", "\(bytesPreloaded)")])
    let ledger = preloadLedger.totals
    metric(
      "mediacache_preload_served_bytes_total", "counter",
      "Preloaded bytes later served to a player (each byte counted once).",
      [("", "\(ledger.servedAfterPreload)")])
    metric(
      "mediacache_preload_evicted_unplayed_bytes_total", "counter",
      "Preloaded bytes evicted (or cut off with a tail) before a player was served them.",
      [("", "\(ledger.evictedUnplayed)")])
    metric(
      "mediacache_preload_unplayed_bytes", "gauge",
      "Preloaded bytes still cached that no player has been served yet.", [("", "\(ledger.unplayed)")])
    metric(
      "mediacache_proxy_active_responses", "gauge", "Responses being streamed now.",
      [("", "\(activeResponses.load(ordering: .relaxed))")])
    if let objects = await recentScan() {
      metric(
        "mediacache_cache_objects", "gauge", "Objects in the cache directory (refreshed every 2 s at most).",
        [("", "\(objects.count)")])
      metric(
        "mediacache_cache_bytes", "gauge",
        "Bytes on disk of the cache's objects (refreshed every 2 s at most).",
        [("", "\(objects.reduce(Int64(0)) { $0 + $1.diskBytes })")])
    }
    return out
  }
}
