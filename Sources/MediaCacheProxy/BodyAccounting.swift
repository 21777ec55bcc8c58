import MediaCacheHTTP

/// Adds what a response has served to the proxy's counters as it goes.
final class BodyAccounting: @unchecked Sendable {
  // Used only by the task writing the body.
  private let bytes: CachedBytes
  private let metrics: ProxyMetrics
  private var counted: (cache: Int64, origin: Int64) = (0, 0)
  private var classified = false
  private let record: AccessRecord

  init(bytes: CachedBytes, metrics: ProxyMetrics, record: AccessRecord) {
    self.bytes = bytes
    self.metrics = metrics
    self.record = record
  }

  func update(finished: Bool) {
    let cache = bytes.bytesFromCache
    let origin = bytes.bytesFromOrigin
    metrics.noteServed(fromCache: cache - counted.cache, fromOrigin: origin - counted.origin)
    let start = bytes.range.lowerBound
    metrics.noteServed(bytes.objectID, start + counted.cache + counted.origin..<start + cache + origin)
    counted = (cache, origin)
    record.note(bytes.objectID, fromCache: cache, fromOrigin: origin)
    if !classified, origin > 0 || finished {
      classified = true
      metrics.noteRequest(hit: origin == 0)
    }
  }
}
