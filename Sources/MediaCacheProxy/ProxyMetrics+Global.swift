import CoreMetrics
import MediaCache
import MediaCacheHTTP
import Prometheus

extension ProxyMetrics {
  /// Makes `registry` the process's swift-metrics backend (`MetricsSystem.bootstrap`, which a process may call
  /// only once) and returns it, so that the libraries' metrics (`CacheMetrics.all`, `ReaderMetrics.all`) are
  /// created on it with their help text. Give it to the server as well
  /// (`ProxyServer.Configuration.metricsRegistry`) and its `/metrics` shows them beside its own:
  ///
  /// ```swift
  /// configuration.metricsRegistry = ProxyMetrics.bootstrapGlobal()
  /// ```
  ///
  /// For the `mediacache proxy` executable, or an app with one proxy and no other swift-metrics backend; an app
  /// with a backend of its own bootstraps that instead (the proxy's own metrics stay on its registry).
  @discardableResult
  public static func bootstrapGlobal(
    _ registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
  ) -> PrometheusCollectorRegistry {
    MetricsSystem.bootstrap(metricsFactory(for: registry))
    return registry
  }

  /// A swift-metrics factory creating metrics on `registry`: swift-prometheus' `PrometheusMetricsFactory`,
  /// except that the libraries' metrics (`CacheMetrics.all`, `ReaderMetrics.all`) get their help text (the
  /// factory alone leaves it empty, and `promtool check metrics` asks for one). What `bootstrapGlobal(_:)`
  /// bootstraps.
  public static func metricsFactory(for registry: PrometheusCollectorRegistry) -> any MetricsFactory {
    DescribedPrometheusFactory(registry: registry, described: CacheMetrics.all + ReaderMetrics.all)
  }
}

/// `PrometheusMetricsFactory` with help text for the metrics it knows the description of.
struct DescribedPrometheusFactory: MetricsFactory {
  let registry: PrometheusCollectorRegistry
  let plain: PrometheusMetricsFactory
  /// Help text by metric name.
  let help: [String: String]

  init(registry: PrometheusCollectorRegistry, described: [MetricDescription]) {
    self.registry = registry
    self.plain = PrometheusMetricsFactory(registry: registry)
    self.help = Dictionary(described.map { ($0.name, $0.help) }, uniquingKeysWith: { first, _ in first })
  }

  func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
    guard let help = help[label] else { return plain.makeCounter(label: label, dimensions: dimensions) }
    return registry.makeCounter(descriptor: .init(label, help: help), labels: dimensions)
  }

  func makeFloatingPointCounter(label: String, dimensions: [(String, String)])
    -> any FloatingPointCounterHandler
  {
    guard let help = help[label] else {
      return plain.makeFloatingPointCounter(label: label, dimensions: dimensions)
    }
    return registry.makeCounter(descriptor: .init(label, help: help), labels: dimensions)
  }

  func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
    guard let help = help[label] else {
      return plain.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
    }
    guard aggregate else {
      return registry.makeGauge(descriptor: .init(label, help: help), labels: dimensions)
    }
    return registry.makeValueHistogram(
      descriptor: .init(label, help: help), labels: dimensions,
      buckets: plain.valueHistogramBuckets[label] ?? plain.defaultValueHistogramBuckets)
  }

  func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
    guard let help = help[label] else { return plain.makeMeter(label: label, dimensions: dimensions) }
    return registry.makeGauge(descriptor: .init(label, help: help), labels: dimensions)
  }

  func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
    guard let help = help[label] else { return plain.makeTimer(label: label, dimensions: dimensions) }
    return registry.makeDurationHistogram(
      descriptor: .init(label, help: help), labels: dimensions,
      buckets: plain.durationHistogramBuckets[label] ?? plain.defaultDurationHistogramBuckets)
  }

  func destroyCounter(_ handler: any CounterHandler) { plain.destroyCounter(handler) }
  func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
    plain.destroyFloatingPointCounter(handler)
  }
  func destroyRecorder(_ handler: any RecorderHandler) { plain.destroyRecorder(handler) }
  func destroyMeter(_ handler: any MeterHandler) { plain.destroyMeter(handler) }
  func destroyTimer(_ handler: any TimerHandler) { plain.destroyTimer(handler) }
}

extension MetricNameDescriptor {
  /// The metric named `name` in full (no namespace, subsystem or unit added), with `help`.
  init(_ name: String, help: String) {
    self.init(metricName: name, unitName: "", helpText: help)
  }
}
