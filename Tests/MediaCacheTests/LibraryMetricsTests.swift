import Foundation
import MediaCacheHTTP
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Metrics
import MetricsTestKit
import Testing

@testable import MediaCache

/// The one swift-metrics backend of this test process: a `TestMetrics`, bootstrapped the first time a test asks
/// for it (`MetricsSystem.bootstrap` may run only once per process). Tests running beside these ones count in
/// it too, so what is checked is that a counter moved at least as far as the test made it move.
enum ProcessMetrics {
  static let shared: TestMetrics = {
    let metrics = TestMetrics()
    MetricsSystem.bootstrap(metrics)
    return metrics
  }()
}

/// The libraries report through swift-metrics (`CacheMetrics`, `ReaderMetrics`): reads of a real cache through
/// a real origin move the hit, miss, byte and origin counters; a compaction pass moves the eviction counters;
/// a corrupt chunk moves the CRC-failure counter, for a reader's check and for the scrub.
@Suite struct LibraryMetricsTests {
  let metrics = ProcessMetrics.shared

  func total(_ metric: MetricDescription, _ dimensions: [(String, String)] = []) -> Int64 {
    metrics.counterTotal(label: metric.name, dimensions: dimensions)
  }

  func timings(_ metric: MetricDescription) -> Int {
    metrics.timers(label: metric.name).reduce(0) { $0 + $1.values.count }
  }

  /// Reads the whole object and returns once what was fetched is committed.
  func readAll(_ reader: CachingReader, _ url: String) async throws -> Int {
    let bytes = try await reader.read(url)
    var count = 0
    do {
      for try await piece in bytes { count += piece.count }
    } catch {
      bytes.close()
      throw error
    }
    await bytes.closeAndCommit()
    return count
  }

  @Test func readsCountHitsMissesBytesAndOriginErrors() async throws {
    let metrics = self.metrics  // bootstrapped before the cache and the reader exist
    try await withReader(chunkSize: 4096, configuration: CachingReader.Configuration()) { reader, origin, _ in
      let size = 20_000
      let url = origin.url(.normal, "metrics-\(UUID().uuidString)", size: size)
      let hits = total(CacheMetrics.hits)
      let misses = total(CacheMetrics.misses)
      let fromOrigin = total(CacheMetrics.servedBytes, [("source", "origin")])
      let fromCache = total(CacheMetrics.servedBytes, [("source", "cache")])
      let fetched = total(ReaderMetrics.originFetchedBytes)
      let requests = timings(ReaderMetrics.originRequestDuration)

      let missed = try await readAll(reader, url)
      #expect(missed == size)
      #expect(total(CacheMetrics.misses) - misses >= 1)
      #expect(total(CacheMetrics.servedBytes, [("source", "origin")]) - fromOrigin >= Int64(size))
      #expect(total(ReaderMetrics.originFetchedBytes) - fetched >= Int64(size))
      #expect(timings(ReaderMetrics.originRequestDuration) - requests >= 1)

      let hit = try await readAll(reader, url)
      #expect(hit == size)
      #expect(total(CacheMetrics.hits) - hits >= 1)
      #expect(total(CacheMetrics.servedBytes, [("source", "cache")]) - fromCache >= Int64(size))

      // An origin that answers gzip: one failed request, counted under its code.
      let kind = [("kind", OriginError.Code.unsupportedContentEncoding.description)]
      let errors = total(ReaderMetrics.originErrors, kind)
      await #expect(throws: OriginError.self) {
        _ = try await readAll(reader, origin.url(.gzip, "metrics-gzip-\(UUID().uuidString)", size: 1000))
      }
      #expect(total(ReaderMetrics.originErrors, kind) - errors >= 1)
      #expect(
        metrics.counters(label: ReaderMetrics.originErrors.name).allSatisfy { $0.dimensions.count == 1 })
    }
  }

  @Test func compactionCountsEvictionsAndCRCFailures() async throws {
    _ = metrics
    try await withTemporaryDirectory { directory in
      let root = FilePath("\(directory)/cache")
      let cache = try MediaCache(
        configuration: .init(directory: root, chunkSize: 4096, memoryCostLimit: 0, durability: .relaxed))
      for index in 0..<3 {
        try await cache.store(
          randomBytes(count: 5 * 4096, seed: UInt64(index)), for: "object-\(index)", policy: .diskOnly)
      }
      let readFailures = total(CacheMetrics.crcFailures, [("during", "read")])
      let scrubFailures = total(CacheMetrics.crcFailures, [("during", "scrub")])
      let evictions = total(CacheMetrics.evictions, [("reason", "size")])
      let evictedBytes = total(CacheMetrics.evictedBytes, [("reason", "size")])
      let passes = timings(CacheMetrics.compactionDuration)

      // A reader's check: a middle chunk (first and last ones may be served from memory) flipped on disk.
      try flipByte(atPath: cache.store.paths(for: cache.objectID(for: "object-0")).data, offset: 2 * 4096 + 5)
      let manager = try cache.assetDataManager(for: "object-0")
      #expect(throws: StoreError.self) { try manager.read(0..<Int64(5 * 4096)) }
      try manager.close()
      #expect(total(CacheMetrics.crcFailures, [("during", "read")]) - readFailures >= 1)

      // The compactor's scrub.
      try flipByte(atPath: cache.store.paths(for: cache.objectID(for: "object-1")).data, offset: 4096 + 7)
      let scrub = try Compactor(directory: root, policy: CompactionPolicy(maxAge: nil, scrubBudget: 1 << 20))
      let scrubbed = try scrub.runPass()
      #expect(scrubbed.chunksDropped >= 1)
      #expect(
        total(CacheMetrics.crcFailures, [("during", "scrub")]) - scrubFailures
          >= Int64(scrubbed.chunksDropped))

      // Evictions for size: every object goes under a one-byte limit.
      let evicting = try Compactor(directory: root, policy: CompactionPolicy(maxSize: 1, maxAge: nil))
      let report = try evicting.runPass()
      #expect(report.removed.count == 3)
      #expect(total(CacheMetrics.evictions, [("reason", "size")]) - evictions >= 3)
      #expect(
        total(CacheMetrics.evictedBytes, [("reason", "size")]) - evictedBytes
          >= report.removed.reduce(0) { $0 + $1.bytes })
      #expect(timings(CacheMetrics.compactionDuration) - passes >= 2)
    }
  }

  @Test func everyMetricHasAPrometheusName() {
    let all = CacheMetrics.all + ReaderMetrics.all
    #expect(Set(all.map(\.name)).count == all.count)
    for metric in all {
      #expect(metric.name.hasPrefix("mediacache_"))
      #expect(metric.name.allSatisfy { $0.isASCII && ($0.isLowercase || $0 == "_") }, "\(metric.name)")
      #expect((metric.kind == .counter) == metric.name.hasSuffix("_total"), "\(metric.name)")
      #expect(!metric.help.isEmpty)
      for dimension in metric.dimensions {
        #expect(!dimension.hasPrefix("__") && dimension.allSatisfy { $0.isASCII && $0.isLowercase })
      }
    }
  }
}
