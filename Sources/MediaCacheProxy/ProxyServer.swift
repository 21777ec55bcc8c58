import Foundation
import Logging
import MediaCache
import MediaCacheHTTP
import MediaCacheStreaming
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals

/// The local HTTP server players read through: `GET|HEAD /<scheme>/<host[:port]>/<path>[?query]` (path form) or
/// `/<name>?url=<percent-encoded origin URL>` (query form) answers from the cache, filling gaps from the origin
/// through a `CachingReader`, with Range support, and HLS playlists and DASH MPDs rewritten so their segments
/// are proxied (and cached) too. `GET /metrics` gives Prometheus text.
///
/// ```swift
/// let proxy = ProxyServer(reader: CachingReader(cache: cache))
/// try await proxy.run { endpoint in print("listening on \(endpoint)") }  // until the task is cancelled
/// ```
public final class ProxyServer: Sendable {
  /// Where and for whom the proxy serves.
  public struct Configuration: Sendable {
    /// Address to bind; loopback by default, so other machines cannot use the proxy.
    public var host: String
    /// Port to bind; 0 picks a free one (see the endpoint given to `run`'s `onListening`).
    public var port: Int
    /// Origin hosts the proxy fetches from (case-insensitive); nil allows any host. Redirects are followed by
    /// the reader's `OriginClient`: give it the same hosts (`OriginClient.Configuration.allowedRedirectHosts`)
    /// so that an origin's redirect cannot lead elsewhere (`mediacache proxy --allow-host` does).
    public var allowedHosts: Set<String>?
    /// Seconds a client connection may go without sending a complete request head (an idle keep-alive
    /// connection, or one sending its head byte by byte) before it is closed. A response being written is
    /// never cut by it.
    public var clientTimeout: Duration
    /// Event loop threads moving the bytes of client connections (at least 1): by default one per core.
    public var eventLoops: Int
    /// Bytes of cache hits read on the I/O executor and not yet handed to their sockets, across all connections
    /// (0: no bound; a hit answered on its event loop takes no share, see `loopHitConnections`). A hit
    /// waits for its share before it is read (first come, first served) and gives it back once its bytes have
    /// reached the socket, or after a quarter second (a client that does not read cannot keep it): under many
    /// connections, reads do not run ahead of what the event loops can send, so the memory they hold stays
    /// about this much. Default 8 MiB: at 256 connections asking 1 MiB ranges, 16 MiB let the peak RSS reach
    /// 81–104 MiB and 8 MiB held it at 66–72, with the same requests per second (docs/PERFORMANCE.md).
    public var hitBytesInFlight: Int64 = 8 << 20
    /// Body bytes handed to NIO and not yet taken by the sockets, across all responses, past which a streamed
    /// response keeps none of its own waiting (0: no bound). Below it, each response lets up to 2 MiB wait, so
    /// its socket stays fed while the next piece is read; a read from the cache that would pass it takes 32 KiB
    /// (it counts from before it runs: `QueuedBytes`), and past it each response waits until its socket has
    /// taken its bytes before it reads the next piece: a client that stops reading holds 32 KiB,
    /// and no write waits for another response's socket. Default 8 MiB: with 16 MiB, 256 clients streaming a
    /// cached object held the proxy at 119–138 MiB, with 8 MiB at 85–92 (docs/PERFORMANCE.md).
    public var queuedResponseBytes = 8 << 20
    /// The most client connections an event loop may serve and still answer cache hits itself, from the page
    /// cache without waiting for the disk (0: never; past it, hits are read on the I/O executor); up to twice
    /// as many while the proxy serves at most this many per loop in all (the kernel spreads new connections
    /// over the loops unevenly). A hit answered on its loop takes no share of `hitBytesInFlight`: it is read
    /// just before the loop writes it. Default 32.
    public var loopHitConnections = 32
    /// How often the objects with preloaded bytes no player got yet are checked against the disk, so that
    /// evictions and cuts by another process (`cache-compactor`) count in
    /// `mediacache_preload_evicted_unplayed_bytes_total` too. Default 10 seconds.
    public var preloadCheckInterval: Duration = .seconds(10)
    /// Request header fields of a player passed on to the origin (lowercased names, such as `authorization`,
    /// `cookie`): `OriginClient.forwardedHeaders` while its request is answered. The proxy being a shared
    /// cache, a response to a request with credentials is stored only if the origin allows it
    /// (`OriginClient.Configuration.isSharedCache`).
    public var forwardedHeaderNames: Set<String> = []
    /// Where the proxy logs: one line per request at `info` (`AccessLog`: method, path without its query,
    /// object, status, bytes, duration, hit/partial/miss, origin bytes), origin and disk failures at `warning`
    /// with their cause. Default: a logger that drops everything.
    public var logger = Logger(label: "mediacache.proxy", factory: { _ in SwiftLogNoOpLogHandler() })
    /// The registry the server creates its metrics on and `GET /metrics` emits (`ProxyMetrics.registry`). Nil
    /// (the default): a new one per server, so several servers in a process keep their counts apart and
    /// nothing process-wide is needed. Give the registry that `ProxyMetrics.bootstrapGlobal(_:)` made the
    /// process's swift-metrics backend to show the libraries' metrics too; servers given one registry share
    /// its counters.
    public var metricsRegistry: PrometheusCollectorRegistry?
    /// The proxy's name in the `Cache-Status` field of its responses (RFC 9211: `NAME; hit`,
    /// `NAME; fwd=miss; stored`), which tells the caches of a tier apart. A structured-field token (see
    /// `isValidCacheStatusName`); the server refuses to start with another. Default `MediaCache`.
    public var cacheStatusName = "MediaCache"
    /// The reverse-proxy mode's mappings (`Upstream`); empty (the default): the forward mode, where a request
    /// names its origin URL in the path form or `?url=`. With mappings, every path is an upstream's except
    /// those under `ProxyServer.adminPrefix`, where the proxy's own endpoints move. The server refuses to start
    /// with two mappings of one prefix.
    public var upstreams: [Upstream] = []

    /// A configuration listening on `host:port` (0: a free port), serving every origin host unless `allowedHosts`
    /// is given (compared case-insensitively), closing idle client connections after `clientTimeout` seconds,
    /// with `eventLoops` event loop threads (nil: one per core).
    public init(
      host: String = "127.0.0.1", port: Int = 0, allowedHosts: Set<String>? = nil,
      clientTimeout: Duration = .seconds(60), eventLoops: Int? = nil
    ) {
      self.host = host
      self.port = port
      self.clientTimeout = clientTimeout
      self.allowedHosts = allowedHosts.map { Set($0.map { $0.lowercased() }) }
      self.eventLoops = max(1, eventLoops ?? System.coreCount)
    }
  }

  /// The address the proxy listens on.
  public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    /// The address, as bound (an IPv6 address without brackets).
    public var host: String
    /// The TCP port, as bound (never 0).
    public var port: Int

    /// An endpoint at `host:port`.
    public init(host: String, port: Int) {
      self.host = host
      self.port = port
    }

    /// `http://HOST:PORT`.
    public var description: String {
      "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
  }

  /// The read engine every request goes through (its cache and origin client).
  public let reader: CachingReader
  /// Where the proxy listens and whom it serves.
  public let configuration: Configuration
  /// Counters served at `/metrics`.
  public let metrics: ProxyMetrics
  /// What `PUT /preload` drives: the start of a feed's next items, fetched in the background.
  public let preloader: Preloader

  fileprivate let listening = Mutex<Endpoint?>(nil)
  /// Shares of `Configuration.hitBytesInFlight` (nil: no bound).
  let hitBudget: ReadBudget?
  /// The bytes all responses have queued in NIO (`Configuration.queuedResponseBytes`).
  let queuedBytes: QueuedBytes
  /// One line per request (`Configuration.logger` at `info`).
  let accessLog: AccessLog
  /// The reverse-proxy mode's mappings; nil in the forward mode.
  let upstreamMap: UpstreamMap?
  /// The `Via` field of forwarded responses (RFC 9110 §7.6.3): `1.1` and the `Cache-Status` name when that is
  /// a token RFC 9110 allows there (no `:` or `/`), else `mediacache`.
  let via: String
  /// `Cache-Status` of a plain hit (`ProxyResponder.cacheStatus`), made once: most responses say it.
  let hitCacheStatus: String
  /// URLs whose responses may not be stored, relayed without the cache for a while (`PassMemo`).
  let passMemo = PassMemo()

  /// Where the proxy listens, once `run` has bound its socket (nil before and after).
  public var endpoint: Endpoint? { listening.withLock { $0 } }

  /// A proxy serving through `reader`; nothing listens until `run` is called.
  public init(reader: CachingReader, configuration: Configuration = Configuration()) {
    self.reader = reader
    self.configuration = configuration
    let metrics = ProxyMetrics(
      cache: reader.cache, registry: configuration.metricsRegistry ?? PrometheusCollectorRegistry())
    self.metrics = metrics
    self.preloader = Preloader(
      reader: reader, ledger: metrics.preloadLedger, onFetched: { metrics.notePreloaded($0) })
    self.accessLog = AccessLog(logger: configuration.logger)
    self.upstreamMap = configuration.upstreams.isEmpty ? nil : UpstreamMap(configuration.upstreams)
    let name = configuration.cacheStatusName
    let isToken =
      !name.isEmpty
      && name.utf8.allSatisfy { byte in
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
          || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
          || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
      }
    self.via = "1.1 \(isToken ? name : "mediacache")"
    self.hitCacheStatus = "\(name); hit"
    self.hitBudget =
      configuration.hitBytesInFlight > 0 ? ReadBudget(limit: configuration.hitBytesInFlight) : nil
    self.queuedBytes = QueuedBytes(limit: configuration.queuedResponseBytes)
  }

  /// Serves until the calling task is cancelled or, when `shutdownSignals` is not empty, one of them arrives
  /// (then connections get two seconds to finish before they are cut). The responses' reads are closed on the
  /// way out; an origin request can outlive its read (a player that left early, a chunk being finished), and
  /// its object is committed once it ends. Before the process exits, stop the `preloader`
  /// (`Preloader.stopAndWait`) and call `reader.finishOpenObjects()`, as `mediacache proxy` does: they cancel
  /// what is still running and return once everything fetched is committed. `onListening` runs once the
  /// socket is bound.
  public func run(
    shutdownSignals: [UnixSignal] = [],
    onListening: @escaping @Sendable (Endpoint) async -> Void = { _ in }
  ) async throws {
    guard Configuration.isValidCacheStatusName(configuration.cacheStatusName) else {
      throw ProxyConfigurationError(
        field: "cacheStatusName",
        reason: "'\(configuration.cacheStatusName.prefix(80))' is not a token (a letter or * first, then "
          + "letters, digits and !#$%&'*+-.^_`|~:/, at most 64)")
    }
    try Upstream.checkDistinct(configuration.upstreams)
    var logger = Logger(label: "mediacache.proxy")
    logger.logLevel = .critical
    var groupConfiguration = ServiceGroupConfiguration(
      services: [.init(service: Listener(server: self, onListening: onListening))],
      gracefulShutdownSignals: shutdownSignals, logger: logger)
    groupConfiguration.maximumGracefulShutdownDuration = .seconds(2)
    defer { listening.withLock { $0 = nil } }
    // Evictions and cut tails settle the preloaded bytes no player got (`mediacache_preload_evicted_…`).
    let events = reader.cache.events()
    let ledger = metrics.preloadLedger
    let settling = Task {
      for await event in events { ledger.note(event) }
    }
    defer { settling.cancel() }
    let checking = Task { [cache = reader.cache, interval = configuration.preloadCheckInterval] in
      while (try? await Task.sleep(for: interval)) != nil {
        await PreloadCheck.settle(ledger, against: cache)
      }
    }
    defer { checking.cancel() }
    try await ServiceGroup(configuration: groupConfiguration).run()
  }

  /// The server as a service: binds, serves until a graceful shutdown (or cancellation), then stops accepting,
  /// lets the responses in progress finish, and cuts what is left if cancelled meanwhile.
  private struct Listener: Service {
    let server: ProxyServer
    let onListening: @Sendable (Endpoint) async -> Void

    func run() async throws {
      // One loop per core by default: under many connections one loop writing every socket was the proxy's
      // bottleneck (two loops on two cores: 12-26% more 64 KiB hits per second, docs/PERFORMANCE.md); each
      // accepts its own connections (`ProxyListeners`). The loops only move bytes; reads from the cache run on
      // the I/O executor, origin requests in AsyncHTTPClient's own loops.
      let group = MultiThreadedEventLoopGroup(numberOfThreads: server.configuration.eventLoops)
      do {
        try await serve(on: group)
      } catch {
        try? await group.shutdownGracefully()
        throw error
      }
      try? await group.shutdownGracefully()
    }

    private func serve(on group: MultiThreadedEventLoopGroup) async throws {
      let configuration = server.configuration
      let connections = ProxyConnections()
      let responder = ProxyResponder(server: server)
      let clientTimeout = TimeAmount(configuration.clientTimeout)
      let limits = {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldCount = 1000
        return limits
      }()
      let policies = LoopHitPolicy.perLoop(of: group, maxConnections: configuration.loopHitConnections)
      if !policies.isEmpty { server.metrics.setHitLoops(Array(group.makeIterator())) }
      defer { server.metrics.setHitLoops([]) }
      let listeners = try await ProxyListeners.bind(
        host: configuration.host, port: configuration.port, group: group
      ) { bootstrap in
        // NIO sets TCP_NODELAY on the listening socket, and Linux gives it to the sockets accepted from it: a
        // `setsockopt` and a future less per connection (3% of the samples of hits on new connections).
        let bootstrap = bootstrap.serverChannelOption(.backlog, value: 256)
        #if !os(Linux)
          _ = bootstrap.childChannelOption(.tcpOption(.tcp_nodelay), value: 1)  // a class: the option is kept
        #endif
        return bootstrap.childChannelInitializer { child in
          child.eventLoop.makeCompletedFuture {
            // NIO's codec answers a malformed or oversized head (over 80 KiB, or over 1000 fields) with 400
            // and closes; its pipelining handler holds the next request until the current response is
            // written. No second check of the response's header fields: they come from `HTTPFields`, whose
            // names are checked tokens and whose values swift-http-types makes legal (CR, LF and NUL
            // replaced); NIO's check of every outbound head cost ~6% of the proxy's cycles answering 64 KiB
            // ranges.
            try child.pipeline.syncOperations.configureHTTPServerPipeline(
              withOutboundHeaderValidation: false, withEncoderConfiguration: .init(),
              withDecoderLimitConfiguration: limits)
            try child.pipeline.syncOperations.addHandler(
              ProxyConnectionHandler(
                responder: responder, clientTimeout: clientTimeout, connections: connections,
                loopHits: policies[ObjectIdentifier(child.eventLoop)]))
            connections.opened(child)
          }
        }
      }
      let endpoint = Endpoint(host: configuration.host, port: listeners.port ?? 0)
      server.listening.withLock { $0 = endpoint }
      await onListening(endpoint)
      try? await gracefulShutdown()  // returns on a shutdown signal or on cancellation
      await listeners.close()
      await withTaskCancellationHandler {
        await connections.drain()
      } onCancel: {
        connections.closeAll()
      }
    }
  }

  // MARK: Proxied URLs

  /// The proxied form of `originURL` relative to the proxy's root. The path form
  /// `/<scheme>/<host[:port]>/<path>[?query]` (see `ProxyPathForm`), so references relative to it resolve to
  /// proxied URLs; for a URL that has none (not http or https, userinfo, a character a request target cannot
  /// hold), the query form `/<name>?url=<percent-encoded URL>` of `queryFormPath(for:)`. (`ProxiedURL.path(for:)`,
  /// in `MediaCacheStreaming`.)
  public static func proxyPath(for originURL: String) -> String {
    ProxiedURL.path(for: originURL)
  }

  /// The query form of `originURL`: `/<name>?url=<percent-encoded URL>`, where the name is the URL's last path
  /// component (so players can tell the type by its extension). Relative references do not resolve through
  /// it; the proxy keeps accepting it. (`ProxiedURL.queryFormPath(for:)`.)
  public static func queryFormPath(for originURL: String) -> String {
    ProxiedURL.queryFormPath(for: originURL)
  }

  /// The full proxied URL of `originURL` on this proxy, once it listens (nil before `run` has bound).
  public func proxyURL(for originURL: String) -> String? {
    endpoint.map { Self.proxyURL(for: originURL, endpoint: $0) }
  }

  /// The full proxied URL of `originURL` on a proxy listening at `endpoint`.
  public static func proxyURL(for originURL: String, endpoint: Endpoint) -> String {
    "\(endpoint)\(proxyPath(for: originURL))"
  }

  /// The origin URL a request for `target` (a request target as a player sends it: path and query) asks the
  /// proxy for: the origin URL of a path-form target (nil if the proxy would refuse to map it back), else its
  /// `url` query parameter, decoded exactly as the proxy decodes it; nil without one.
  /// (`ProxiedURL.originURL(inRequestTarget:)`.)
  public static func originURL(inRequestTarget target: String) -> String? {
    ProxiedURL.originURL(inRequestTarget: target)
  }
}
