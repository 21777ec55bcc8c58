import CoreMetrics
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestSupport
import Prometheus
import Testing

/// The proxy's `/metrics` passes Prometheus's own linter (`promtool check metrics`: the text format, HELP and
/// TYPE lines, counter names ending in `_total`) after a miss, a hit and an origin failure. It is emitted by
/// swift-prometheus from the server's own registry: servers in one process, with no swift-metrics backend
/// bootstrapped for them, keep their counts apart; the libraries' metrics, on a registry through
/// `ProxyMetrics.metricsFactory(for:)`, pass the linter too.
@Suite struct MetricsExpositionTests {
  /// `promtool check metrics` on `text`: its exit status and what it printed.
  func promtool(_ text: String, in directory: String) async throws -> CommandResult {
    let file = "\(directory)/metrics-\(UUID().uuidString).txt"
    try text.write(toFile: file, atomically: true, encoding: .utf8)
    return try await run("/bin/sh", ["-c", "/usr/bin/promtool check metrics < '\(file)' 2>&1"])
  }

  @Test func promtoolFindsNothingToSay() async throws {
    try await withOriginAndProxy { origin, _, port, directory in
      let object = "/http/127.0.0.1:\(origin.port)/normal/counted?size=200000"
      for path in [object, object, "/http/127.0.0.1:\(origin.port)/normal/refused"] {
        _ = try await blocking { try rawRequest(port: port, path) }
      }
      let text = String(
        decoding: try await blocking { try rawRequest(port: port, "/metrics") }.body, as: UTF8.self)
      #expect(text.contains("mediacache_proxy_cache_hits_total 1\n"), "\(text)")
      let checked = try await promtool(text, in: directory)
      #expect(checked.status == 0 && checked.text.isEmpty, "\(checked.text)")
      // The check can fail: a counter without `_total`.
      let broken = try await promtool("# HELP foo x\n# TYPE foo counter\nfoo 1\n", in: directory)
      #expect(broken.status != 0 && broken.text.contains("_total"), "\(broken.text)")
    }
  }

  /// A proxy in this process, started on a reader over a fresh cache, until `body` returns.
  func withServer(
    _ reader: CachingReader, _ body: (ProxyServer, Int) async throws -> Void
  ) async throws {
    let (proxy, endpoint, server) = try await startInProcessProxy(reader)
    defer { server.cancel() }
    try await body(proxy, endpoint.port)
  }

  /// The value of the sample `name` (with its labels) in an exposition.
  func sample(_ name: String, in text: String) -> Double? {
    text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap {
      Double($0.dropFirst(name.count + 1))
    }
  }

  @Test func inProcessServersEmitTheirOwnRegistries() async throws {
    try await withTemporaryDirectory { directory in
      try await withOrigin { origin in
        let cache = try MediaCache(
          configuration: .init(
            directory: FilePath("\(directory)/cache"), chunkSize: 65536, durability: .relaxed))
        let client = OriginClient()
        defer { Task { try? await client.shutdown() } }
        let reader = CachingReader(cache: cache, client: client)
        try await withServer(reader) { first, port in
          try await withServer(reader) { second, otherPort in
            #expect(first.metrics.registry !== second.metrics.registry)
            let object = ProxyServer.proxyPath(for: origin.url(.normal, "in-process", size: 200_000))
            let refused = ProxyServer.proxyPath(for: origin.url(.gzip, "refused", size: 1000))
            for path in [object, object, refused] {
              _ = try await blocking { try rawRequest(port: port, path) }
            }
            let text = String(
              decoding: try await blocking { try rawRequest(port: port, "/metrics") }.body, as: UTF8.self)
            #expect(sample("mediacache_proxy_cache_misses_total", in: text) == 1, "\(text)")
            #expect(sample("mediacache_proxy_cache_hits_total", in: text) == 1, "\(text)")
            #expect(sample("mediacache_proxy_origin_errors_total", in: text) == 1, "\(text)")
            #expect(sample("mediacache_proxy_requests_total{code=\"2xx\"}", in: text) ?? 0 >= 2, "\(text)")
            let fromCache = sample("mediacache_proxy_served_bytes_total{source=\"cache\"}", in: text) ?? 0
            let fromOrigin = sample("mediacache_proxy_served_bytes_total{source=\"origin\"}", in: text) ?? 0
            #expect(fromCache >= 200_000 && fromCache + fromOrigin == 400_000, "\(text)")
            #expect(sample("mediacache_proxy_hit_ratio", in: text) == fromCache / 400_000, "\(text)")
            #expect(sample("mediacache_cache_objects", in: text) ?? 0 >= 1, "\(text)")
            let checked = try await promtool(text, in: directory)
            #expect(checked.status == 0 && checked.text.isEmpty, "\(checked.text)")
            // The other server answered nothing but its own /metrics.
            let other = String(
              decoding: try await blocking { try rawRequest(port: otherPort, "/metrics") }.body, as: UTF8.self
            )
            #expect(sample("mediacache_proxy_cache_misses_total", in: other) == 0, "\(other)")
            #expect(sample("mediacache_proxy_cache_hits_total", in: other) == 0, "\(other)")
            #expect(sample("mediacache_proxy_origin_errors_total", in: other) == 0, "\(other)")
          }
        }
      }
    }
  }

  /// What `mediacache proxy` shows once `ProxyMetrics.bootstrapGlobal` made its registry swift-metrics'
  /// backend: every metric of the libraries, with its help text, passing promtool beside the proxy's own. (The
  /// factory is used directly: this test process has its own backend.)
  @Test func theLibrariesMetricsOnARegistryPassPromtool() async throws {
    try await withTemporaryDirectory { directory in
      let registry = PrometheusCollectorRegistry()
      let factory = ProxyMetrics.metricsFactory(for: registry)
      let described = CacheMetrics.all + ReaderMetrics.all
      for metric in described {
        let dimensions = metric.dimensions.map { ($0, "someValue") }
        switch metric.kind {
        case .counter:
          CoreMetrics.Counter(label: metric.name, dimensions: dimensions, factory: factory).increment(by: 3)
        case .timer:
          CoreMetrics.Timer(label: metric.name, dimensions: dimensions, factory: factory)
            .recordMilliseconds(20)
        }
      }
      // A metric of some other library: no help text, as swift-prometheus makes it.
      CoreMetrics.Counter(label: "other_total", factory: factory).increment()
      let text = registry.emitToString()
      for metric in described {
        #expect(text.contains("# HELP \(metric.name) \(metric.help)\n"), "\(metric.name)")
        #expect(text.contains("# TYPE \(metric.name) \(metric.kind == .counter ? "counter" : "histogram")\n"))
      }
      #expect(sample("mediacache_origin_request_duration_seconds_count", in: text) == 1, "\(text)")
      #expect(sample("mediacache_evictions_total{reason=\"someValue\"}", in: text) == 3, "\(text)")
      let checked = try await promtool(
        text.split(separator: "\n").filter { !$0.contains("other_total") }.joined(separator: "\n") + "\n",
        in: directory)
      #expect(checked.status == 0 && checked.text.isEmpty, "\(checked.text)")
    }
  }
}
