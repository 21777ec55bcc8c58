import CoreMetrics
import Foundation
import Metrics
import Synchronization

/// One metric a MediaCache library reports through swift-metrics: the label it is created with (its name in
/// Prometheus), what kind of metric it is, its dimensions, and one line for a person (a Prometheus backend's
/// `HELP` line). The names are stable and documented in docs/REPORTS.md ("Metrics").
public struct MetricDescription: Sendable, Hashable {
  /// What kind of swift-metrics object reports the metric.
  public enum Kind: String, Sendable, Hashable {
    /// A `Counter` (monotonic; its name ends in `_total`).
    case counter
    /// A `Timer` (durations; a Prometheus backend makes it a histogram in seconds).
    case timer
  }

  /// The label the metric is created with: `mediacache_…`, valid as a Prometheus metric name.
  public var name: String
  /// Counter or timer.
  public var kind: Kind
  /// The names of its dimensions (valid Prometheus label names), empty for none.
  public var dimensions: [String]
  /// What it counts or times, in one line.
  public var help: String

  /// A description of the metric `name`.
  public init(name: String, kind: Kind, dimensions: [String] = [], help: String) {
    self.name = name
    self.kind = kind
    self.dimensions = dimensions
    self.help = help
  }
}

/// The core library's metrics, reported through swift-metrics (`MetricsSystem`): reads answered from the cache
/// or not, bytes served, evictions and trims by the compactor, chunks dropped for a failed CRC, and the
/// duration of compaction passes.
///
/// Nothing is recorded anywhere unless the app bootstraps a backend (`MetricsSystem.bootstrap`, once per
/// process): until then the metrics are swift-metrics' no-op ones. Each metric object is made once, from the
/// first factory other than the no-op one that the library sees, so a backend bootstrapped after the cache was
/// opened still gets every metric. The read engine's metrics (`MediaCacheHTTP`'s `ReaderMetrics`) follow the
/// same rules.
///
/// ```swift
/// MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))  // any swift-metrics backend
/// let cache = try MediaCache(configuration: configuration)
/// ```
public enum CacheMetrics {
  /// `mediacache_cache_hits_total`: reads answered entirely from the cache.
  public static let hits = MetricDescription(
    name: "mediacache_cache_hits_total", kind: .counter,
    help: "Reads answered entirely from the cache (no byte from an origin).")
  /// `mediacache_cache_misses_total`: reads that needed bytes from an origin.
  public static let misses = MetricDescription(
    name: "mediacache_cache_misses_total", kind: .counter,
    help: "Reads that needed bytes from an origin.")
  /// `mediacache_served_bytes_total{source}`: bytes handed to readers; `source` is `cache` (read from the
  /// cache's files, CRC-checked) or `origin` (straight from an origin response, written to the cache too).
  public static let servedBytes = MetricDescription(
    name: "mediacache_served_bytes_total", kind: .counter, dimensions: ["source"],
    help: "Bytes handed to readers, by where they came from (cache or origin).")
  /// `mediacache_evictions_total{reason}`: objects the compactor removed whole; `reason` is a
  /// `RemovalReason` (`size`, `age`, `corrupt`).
  public static let evictions = MetricDescription(
    name: "mediacache_evictions_total", kind: .counter, dimensions: ["reason"],
    help: "Objects the compactor removed, by reason (size, age, corrupt).")
  /// `mediacache_evicted_bytes_total{reason}`: the bytes on disk those evictions freed.
  public static let evictedBytes = MetricDescription(
    name: "mediacache_evicted_bytes_total", kind: .counter, dimensions: ["reason"],
    help: "Bytes on disk freed by the compactor's evictions, by reason (size, age, corrupt).")
  /// `mediacache_trims_total`: objects whose tail the compactor cut, keeping their head
  /// (`CompactionPolicy.keepHeads`).
  public static let trims = MetricDescription(
    name: "mediacache_trims_total", kind: .counter,
    help: "Objects whose tail the compactor cut to free space, their head kept.")
  /// `mediacache_trimmed_bytes_total`: the bytes on disk those cuts freed.
  public static let trimmedBytes = MetricDescription(
    name: "mediacache_trimmed_bytes_total", kind: .counter,
    help: "Bytes on disk freed by cutting tails of objects.")
  /// `mediacache_crc_failures_total{during}`: chunks (or spans of incomplete chunks) that failed their CRC
  /// (or were short) and were dropped, to be fetched again; `during` is `read` (a reader's check), `scrub` (the
  /// compactor's scrub) or `check` (the checker's repair).
  public static let crcFailures = MetricDescription(
    name: "mediacache_crc_failures_total", kind: .counter, dimensions: ["during"],
    help: "Chunks that failed their CRC and were dropped, by when it was found (read, scrub, check).")
  /// `mediacache_compaction_duration_seconds`: how long compaction passes took (dry runs included).
  public static let compactionDuration = MetricDescription(
    name: "mediacache_compaction_duration_seconds", kind: .timer,
    help: "Duration of compaction passes.")

  /// Every metric of the core library.
  public static let all: [MetricDescription] = [
    hits, misses, servedBytes, evictions, evictedBytes, trims, trimmedBytes, crcFailures, compactionDuration,
  ]

  /// When a chunk's CRC failure was found (the `during` dimension of `crcFailures`).
  package enum CRCCheck: String, Sendable, CaseIterable {
    /// A reader's check before bytes left the library.
    case read
    /// The compactor's scrub.
    case scrub
    /// The checker's repair (`CacheChecker`, `cache-fsck`).
    case check
  }

  /// The metric objects, made once per backend.
  final class Handles: Sendable {
    let hits: Counter
    let misses: Counter
    let servedFromCache: Counter
    let servedFromOrigin: Counter
    let evictions: [RemovalReason: Counter]
    let evictedBytes: [RemovalReason: Counter]
    let trims: Counter
    let trimmedBytes: Counter
    let crcFailures: [CRCCheck: Counter]
    let compactionDuration: CoreMetrics.Timer

    init(factory: any MetricsFactory) {
      func counter(_ metric: MetricDescription, _ dimensions: [(String, String)] = []) -> Counter {
        Counter(label: metric.name, dimensions: dimensions, factory: factory)
      }
      hits = counter(CacheMetrics.hits)
      misses = counter(CacheMetrics.misses)
      servedFromCache = counter(servedBytes, [("source", "cache")])
      servedFromOrigin = counter(servedBytes, [("source", "origin")])
      // Manual removals are not evictions (`MediaCache.remove`): only what the compactor removes.
      let reasons: [RemovalReason] = [.size, .age, .corrupt]
      evictions = Dictionary(
        uniqueKeysWithValues: reasons.map { ($0, counter(CacheMetrics.evictions, [("reason", $0.rawValue)])) }
      )
      evictedBytes = Dictionary(
        uniqueKeysWithValues: reasons.map {
          ($0, counter(CacheMetrics.evictedBytes, [("reason", $0.rawValue)]))
        })
      trims = counter(CacheMetrics.trims)
      trimmedBytes = counter(CacheMetrics.trimmedBytes)
      crcFailures = Dictionary(
        uniqueKeysWithValues: CRCCheck.allCases.map {
          ($0, counter(CacheMetrics.crcFailures, [("during", $0.rawValue)]))
        })
      compactionDuration = CoreMetrics.Timer(
        label: CacheMetrics.compactionDuration.name, dimensions: [], factory: factory)
    }
  }

  static let handles = LazyMetrics(Handles.init)

  /// A read of the read engine ended having delivered `fromCache` bytes from the cache's files and
  /// `fromOrigin` from origin responses: a hit when no byte came from an origin, a miss otherwise (a read that
  /// delivered nothing is neither).
  package static func noteRead(fromCache: Int64, fromOrigin: Int64) {
    guard fromCache > 0 || fromOrigin > 0 else { return }
    let handles = handles.current
    if fromOrigin > 0 { handles.misses.increment() } else { handles.hits.increment() }
  }

  /// A whole-object lookup (`MediaCache.data(for:)`) found nothing: a miss.
  package static func noteMiss() { handles.current.misses.increment() }

  /// `count` bytes were handed to a reader, from the cache's files or straight from an origin response.
  package static func noteServed(_ count: Int, fromOrigin: Bool) {
    guard count > 0 else { return }
    let handles = handles.current
    (fromOrigin ? handles.servedFromOrigin : handles.servedFromCache).increment(by: Int64(count))
  }

  /// `count` chunks (or spans) failed their CRC and were dropped.
  package static func noteCRCFailures(_ count: Int, during check: CRCCheck) {
    guard count > 0 else { return }
    handles.current.crcFailures[check]?.increment(by: Int64(count))
  }

  /// What a compaction pass did: its evictions, cuts and scrub drops (none of them for a dry run, which
  /// changes nothing), and its duration.
  static func noteCompaction(_ report: CompactionReport) {
    let handles = handles.current
    handles.compactionDuration.record(duration: report.duration)
    guard !report.dryRun else { return }
    for object in report.removed {
      handles.evictions[object.reason]?.increment()
      handles.evictedBytes[object.reason]?.increment(by: max(0, object.bytes))
    }
    if !report.trimmed.isEmpty {
      handles.trims.increment(by: Int64(report.trimmed.count))
      handles.trimmedBytes.increment(by: report.trimmed.reduce(Int64(0)) { $0 + max(0, $1.bytes) })
    }
    if report.chunksDropped > 0 {
      handles.crcFailures[.scrub]?.increment(by: Int64(report.chunksDropped))
    }
  }
}

/// A set of metric objects made once from the process's swift-metrics backend: the no-op one until an app
/// bootstraps `MetricsSystem`, then (for good) one made from the bootstrapped factory. Reading `current` is one
/// atomic load once bound; before, it also reads `MetricsSystem.factory` (a read lock).
///
/// The factory is taken from `MetricsSystem.factory`, which is a task-local one inside
/// `withMetricsFactory`: the first use outside the no-op factory binds the set for the whole process.
package final class LazyMetrics<Handles: AnyObject & Sendable>: Sendable {
  private let make: @Sendable (any MetricsFactory) -> Handles
  private let bound = AtomicLazyReference<Handles>()
  private let unbound: Handles

  /// A set made by `make` from the backend's factory.
  package init(_ make: @escaping @Sendable (any MetricsFactory) -> Handles) {
    self.make = make
    self.unbound = make(NOOPMetricsHandler.instance)
  }

  /// The metric objects of the backend bootstrapped now (the no-op ones before).
  package var current: Handles {
    if let handles = bound.load() { return handles }
    let factory = MetricsSystem.factory
    if factory is NOOPMetricsHandler { return unbound }
    return bound.storeIfNil(make(factory))
  }
}
