import CoreMetrics
import MediaCache
import Metrics
import Synchronization

/// The read engine's metrics about origins, reported through swift-metrics (`MetricsSystem`): body bytes
/// fetched, failed requests by `OriginError` code, and how long requests took. The reads it answers count in
/// the core library's `CacheMetrics` (hits, misses, served bytes).
///
/// As for `CacheMetrics`, nothing is recorded until the app bootstraps a backend; each metric object is made
/// once, from the first factory other than the no-op one. Names and meanings: docs/REPORTS.md ("Metrics").
public enum ReaderMetrics {
  /// `mediacache_origin_fetched_bytes_total`: body bytes received from origins (by players' reads, prefetch
  /// and preloading alike), counted as they arrive.
  public static let originFetchedBytes = MetricDescription(
    name: "mediacache_origin_fetched_bytes_total", kind: .counter,
    help: "Body bytes received from origins.")
  /// `mediacache_origin_errors_total{kind}`: origin requests that failed, by `OriginError` code (`kind`:
  /// `httpStatus`, `timedOut`, `connectionFailed`, `truncatedBody`, …). Each attempt counts: a request retried
  /// twice before it failed for good counts three times. Cancelled requests do not count.
  public static let originErrors = MetricDescription(
    name: "mediacache_origin_errors_total", kind: .counter, dimensions: ["kind"],
    help: "Origin requests that failed, by OriginError code (each attempt counts).")
  /// `mediacache_origin_request_duration_seconds`: from sending an origin request to the end of its body (or
  /// its failure), for every request, the one-byte probes of suffix ranges included.
  public static let originRequestDuration = MetricDescription(
    name: "mediacache_origin_request_duration_seconds", kind: .timer,
    help: "Duration of origin requests, from sending to the end of the body or the failure.")

  /// `mediacache_reads_continued_from_origin_total`: reads whose object another writer replaced after they
  /// had delivered bytes, finished from the origin under the strong entity tag of the version they delivered
  /// (`OriginTail`).
  public static let readsContinuedFromOrigin = MetricDescription(
    name: "mediacache_reads_continued_from_origin_total", kind: .counter,
    help: "Reads whose object was replaced mid-read, finished from the origin under their entity tag.")

  /// Every metric of the read engine (the reads it answers count in `CacheMetrics.all`).
  public static let all: [MetricDescription] = [
    originFetchedBytes, originErrors, originRequestDuration, readsContinuedFromOrigin,
  ]

  /// The metric objects, made once per backend; the error counters once per code, when first needed.
  final class Handles: Sendable {
    let factory: any MetricsFactory
    let fetchedBytes: Counter
    let requestDuration: CoreMetrics.Timer
    let continuedFromOrigin: Counter
    private let errors = Mutex<[OriginError.Code: Counter]>([:])

    init(factory: any MetricsFactory) {
      self.factory = factory
      fetchedBytes = Counter(label: originFetchedBytes.name, dimensions: [], factory: factory)
      requestDuration = CoreMetrics.Timer(label: originRequestDuration.name, dimensions: [], factory: factory)
      continuedFromOrigin = Counter(label: readsContinuedFromOrigin.name, dimensions: [], factory: factory)
    }

    func errors(_ code: OriginError.Code) -> Counter {
      errors.withLock { counters in
        if let counter = counters[code] { return counter }
        let counter = Counter(
          label: originErrors.name, dimensions: [("kind", code.description)], factory: factory)
        counters[code] = counter
        return counter
      }
    }
  }

  static let handles = LazyMetrics(Handles.init)

  /// `count` body bytes arrived from an origin.
  static func noteFetched(_ count: Int) {
    guard count > 0 else { return }
    handles.current.fetchedBytes.increment(by: Int64(count))
  }

  /// A read went on from the origin after its object was replaced (`OriginTail`).
  static func noteContinuedFromOrigin() { handles.current.continuedFromOrigin.increment() }

  /// An origin request that took `duration` ended with `error` (nil: it succeeded). Only `OriginError`s count
  /// as failures: a cancellation or a cache that refused the bytes (`StoreError`) is not the origin's.
  static func noteRequest(duration: Duration, error: (any Error)?) {
    let handles = handles.current
    handles.requestDuration.record(duration: duration)
    if let failure = error as? OriginError { handles.errors(failure.code).increment() }
  }
}
