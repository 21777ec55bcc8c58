import ArgumentParser
import Foundation
import Logging
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy

#if canImport(Glibc)
  import Glibc
#endif

struct ProxyCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "proxy",
    abstract: "Serve media to players over local HTTP, through the cache.",
    discussion: """
      Prints "listening on http://HOST:PORT" as its first line, then serves until SIGINT or SIGTERM. A player \
      reads http://HOST:PORT/SCHEME/HOST[:PORT]/PATH[?QUERY] for SCHEME://HOST[:PORT]/PATH[?QUERY], so \
      relative URLs in playlists and MPDs resolve through the proxy; http://HOST:PORT/NAME?url=ORIGIN-URL \
      (ORIGIN-URL percent-encoded, NAME free) works too. Range requests are answered from the cache, gaps are \
      fetched from the origin and cached as they stream; HLS playlists and DASH MPDs have their absolute URLs \
      rewritten so segments go through the proxy too. Players never wait for a request slot; background work \
      has its own limit per origin host. GET /metrics gives Prometheus counters.

      Example:
        mediacache proxy --port 8089 &
        ffplay "http://127.0.0.1:8089/https/example.com/movie.mp4"
        mpv "http://127.0.0.1:8089/https/example.com/dash/manifest.mpd"
      """)

  @OptionGroup var cache: CacheOptions
  @OptionGroup var origin: OriginOptions
  @Option(help: "Address to listen on. Anything but loopback lets other machines use the proxy.")
  var host = "127.0.0.1"
  @Option(help: "Port to listen on (0: any free port, shown in the first line).") var port = 0
  @Option(
    name: .customLong("allow-host"),
    help: "Only fetch from this origin host (repeat for several). Default: any host.")
  var allowedHosts: [String] = []
  @Option(
    help: ArgumentHelp(
      "Evict least recently used objects to keep the cache under this size (e.g. 20G).", valueName: "SIZE"),
    transform: ByteSizeArgument.parse)
  var maxSize: ByteSizeArgument?
  @Option(help: KeepHeadsArgument.help, transform: KeepHeadsArgument.parse)
  var keepHeads = KeepHeadsArgument.mediaStart
  @Option(help: "durable (fsync data before each manifest commit) or relaxed.") var durability: Durability =
    .durable
  @Option(help: ArgumentHelp("Give up connecting to an origin after this long.", valueName: "SECONDS"))
  var connectTimeout: Double = 10
  @Option(help: ArgumentHelp("Give up on an origin that sends nothing for this long.", valueName: "SECONDS"))
  var idleTimeout: Double = 30
  @Option(
    help: ArgumentHelp(
      "Give up on an origin whose response head is not complete this long after the request.",
      valueName: "SECONDS"))
  var headTimeout: Double = 30
  @Option(
    help: ArgumentHelp(
      "Close a client connection that sends no complete request for this long (idle, or sending its head "
        + "slowly); a response being sent is never cut.", valueName: "SECONDS"))
  var clientTimeout: Double = 60
  @Option(help: "Retries of an origin request after a connection error, a 5xx or a cut-off body.")
  var retries = 3
  @Option(
    help: ArgumentHelp(
      "Chunk size in bytes for new objects (default 1 MiB): the unit the origin is asked for and each CRC "
        + "covers. Smaller chunks fetch fewer bytes a player does not read when it seeks; objects already cached "
        + "keep theirs.", valueName: "BYTES"))
  var chunkSize = 1 << 20
  @Option(
    help: ArgumentHelp(
      "How far ahead of a player the origin is asked for bytes, at least (grows by an eighth of what the player "
        + "has read; 0: one request to the end). Bounds what a player that drops a request leaves fetched.",
      valueName: "BYTES"))
  var originRequestWindow: Int64 = 256 << 10
  @Option(
    help: ArgumentHelp(
      "Event loop threads serving client connections (default: one per core).", valueName: "COUNT"))
  var eventLoops: Int?
  @Option(
    help: ArgumentHelp(
      "Bytes of cache hits read and not yet sent, across all connections (default 8M; 0: no bound). Hits "
        + "beyond it wait their turn.", valueName: "SIZE"),
    transform: ByteSizeArgument.parse)
  var hitBytesInFlight: ByteSizeArgument?
  @Option(
    help: ArgumentHelp(
      "Client connections an event loop may serve and still answer cache hits in memory itself, or twice as "
        + "many while the proxy serves at most this many per loop (default 32; 0: never, every hit is read on the "
        + "I/O threads).", valueName: "COUNT"))
  var loopHitConnections: Int?
  @Option(
    name: .customLong("forward-header"),
    help: ArgumentHelp(
      "Pass this request header of a player on to the origin (repeatable), such as Authorization or Cookie. "
        + "A response to a request with credentials is cached only if it says Cache-Control public, s-maxage "
        + "or must-revalidate, unless --private-cache.", valueName: "NAME"))
  var forwardHeader: [String] = []
  @Flag(
    help: ArgumentHelp(
      "The proxy serves one user (an app's own proxy): cache responses to requests with credentials "
        + "(--origin-header Authorization or Cookie) even when they are not marked public."))
  var privateCache = false
  @Flag(
    help: ArgumentHelp(
      "Ignore the origin's Cache-Control, Expires and Vary: store every response, fresh for --default-ttl "
        + "(nginx: proxy_ignore_headers Cache-Control Expires Vary). For media origins that send no-store or max-age=0 "
        + "on files that never change."))
  var ignoreCacheControl = false
  @Option(
    name: .customLong("default-ttl"),
    help: ArgumentHelp(
      "How long a response without max-age, s-maxage or Expires stays fresh, in seconds, before it is "
        + "revalidated (nginx: proxy_cache_valid). Default: a tenth of its age since Last-Modified, from 120 "
        + "to 86400; 120 without Last-Modified.", valueName: "SECONDS"))
  var defaultTTL: Int64?
  @Option(
    help: ArgumentHelp(
      "How often preloaded bytes no player got yet are checked against the disk, so that another process's "
        + "evictions count in the preload metrics (default 10).", valueName: "SECONDS"))
  var preloadCheckInterval: Double = 10
  @Option(
    help: ArgumentHelp(
      "What the proxy logs to standard error as logfmt lines: info adds one line per request (method, path "
        + "without its query, object, status, bytes, duration, hit/partial/miss, origin bytes); warning (the "
        + "default) logs origin and disk failures with their cause.",
      valueName: "trace|debug|info|notice|warning|error|critical"))
  var logLevel = "warning"
  @Option(
    help: ArgumentHelp(
      "The proxy's name in the Cache-Status field of its responses (RFC 9211), to tell the caches of a tier "
        + "apart (default MediaCache).", valueName: "NAME"))
  var cacheStatusName = "MediaCache"
  @Option(
    name: .customLong("upstream"),
    help: ArgumentHelp(
      "Reverse-proxy mode: serve GET /PATH from URL/PATH (path and query kept); /PREFIX=URL maps only paths "
        + "under /PREFIX (the longest prefix wins; repeat for several). The path form and ?url= are then not "
        + "interpreted, and the proxy's own endpoints move under /.mediacache/ (metrics, preload, dashboard).",
      valueName: "URL|/PREFIX=URL"))
  var upstreams: [String] = []
  @OptionGroup var requestLimits: RequestLimitOptions

  /// `--upstream`, parsed (`validate` refused what cannot be).
  var parsedUpstreams: [Upstream] { upstreams.compactMap { try? Upstream(argument: $0) } }

  func validate() throws {
    guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
    if let maxSize, maxSize.bytes <= 0 { throw ValidationError("--max-size must be positive") }
    for (name, value) in [
      ("connect", connectTimeout), ("idle", idleTimeout), ("head", headTimeout), ("client", clientTimeout),
    ] where !(value > 0 && HumanUnits.isDuration(value)) {
      throw ValidationError(
        "--\(name)-timeout must be positive and at most \(Int(HumanUnits.maxDurationSeconds)) seconds, not \(value)"
      )
    }
    guard (0...20).contains(retries) else { throw ValidationError("--retries must be 0...20") }
    guard ProxyServer.Configuration.isValidCacheStatusName(cacheStatusName) else {
      throw ValidationError(
        "--cache-status-name '\(cacheStatusName.prefix(80))' is not a token: a letter or * first, then letters, "
          + "digits and !#$%&'*+-.^_`|~:/, at most 64 characters")
    }
    for upstream in upstreams {
      do {
        _ = try Upstream(argument: upstream)
      } catch {
        throw ValidationError("--upstream \(error.reason)")
      }
    }
    do {
      try Upstream.checkDistinct(parsedUpstreams)
    } catch {
      throw ValidationError("--upstream: \(error.reason)")
    }
    if let hitBytesInFlight, hitBytesInFlight.bytes < 0 {
      throw ValidationError("--hit-bytes-in-flight must be at least 0")
    }
    for name in forwardHeader {
      do {
        _ = try OriginHeader(name: name, value: "")
      } catch {
        throw ValidationError("--forward-header '\(name.prefix(64))': \(error.description)")
      }
    }
    guard Logger.Level(named: logLevel) != nil else {
      throw ValidationError(
        "--log-level '\(logLevel)' is not a level (trace, debug, info, notice, warning, error, critical)")
    }
    guard preloadCheckInterval > 0, preloadCheckInterval <= 86400 else {
      throw ValidationError("--preload-check-interval must be more than 0 and at most 86400 seconds")
    }
    if let defaultTTL, !(0...2_147_483_648).contains(defaultTTL) {
      throw ValidationError("--default-ttl must be 0...2147483648 seconds, not \(defaultTTL)")
    }
    if let loopHitConnections, loopHitConnections < 0 {
      throw ValidationError("--loop-hit-connections must be at least 0, not \(loopHitConnections)")
    }
    if let eventLoops, !(1...256).contains(eventLoops) {
      throw ValidationError("--event-loops must be 1...256, not \(eventLoops)")
    }
    guard originRequestWindow >= 0 else {
      throw ValidationError("--origin-request-window must be at least 0, not \(originRequestWindow)")
    }
    try validateChunkSizeOption(chunkSize)
  }

  func run() async throws {
    try await reportingErrors {
      var clientConfiguration = OriginClient.Configuration(
        connectTimeout: .seconds(connectTimeout), idleTimeout: .seconds(idleTimeout),
        headTimeout: .seconds(headTimeout))
      clientConfiguration.isSharedCache = !privateCache
      // An origin's redirect may not lead to a host --allow-host leaves out.
      clientConfiguration.allowedRedirectHosts =
        allowedHosts.isEmpty ? nil : Set(allowedHosts.map { $0.lowercased() })
      clientConfiguration.freshness = FreshnessPolicy(
        ignoresCacheControl: ignoreCacheControl, defaultTTL: defaultTTL.map { .seconds($0) })
      let client = try origin.client(clientConfiguration)
      var configuration = cache.configuration(
        chunkSize: chunkSize, durability: durability,
        commitPolicy: .init(bytes: 32 << 20, interval: .seconds(1)))
      configuration.maxSize = maxSize?.bytes
      configuration.keepHeads = keepHeads.window
      // Opening the cache creates and checks its directories: on the I/O executor, like every file-system call
      // of the running proxy.
      let settings = configuration
      let mediaCache = try await IOExecutor.shared.run { try MediaCache(configuration: settings) }
      var readerConfiguration = requestLimits.configuration(maxRetries: retries)
      readerConfiguration.originRequestWindow = originRequestWindow
      // Objects only read stay open a second after their last read, so that many short reads of the same
      // objects (range requests) do not each open and close their files.
      readerConfiguration.idleSessionLinger = .seconds(1)
      let level = Logger.Level(named: logLevel) ?? .warning
      LoggingSystem.bootstrap { LogfmtHandler(label: $0, level: level) }
      let reader = CachingReader(
        cache: mediaCache, client: client, configuration: readerConfiguration,
        backgroundActivityLogger: Logger(label: "mediacache.reader"))
      var serverConfiguration = ProxyServer.Configuration(
        host: host, port: port, allowedHosts: allowedHosts.isEmpty ? nil : Set(allowedHosts),
        clientTimeout: .seconds(clientTimeout), eventLoops: eventLoops)
      if let hitBytesInFlight { serverConfiguration.hitBytesInFlight = hitBytesInFlight.bytes }
      if let loopHitConnections { serverConfiguration.loopHitConnections = loopHitConnections }
      serverConfiguration.preloadCheckInterval = .seconds(preloadCheckInterval)
      serverConfiguration.logger = Logger(label: "mediacache.proxy")
      serverConfiguration.forwardedHeaderNames = Set(forwardHeader.map { $0.lowercased() })
      serverConfiguration.cacheStatusName = cacheStatusName
      serverConfiguration.upstreams = parsedUpstreams
      // The libraries' swift-metrics go to the same registry as the proxy's own: one /metrics for both.
      serverConfiguration.metricsRegistry = ProxyMetrics.bootstrapGlobal()
      let server = ProxyServer(reader: reader, configuration: serverConfiguration)
      ProxyAllocator.startGivingBack(logger: serverConfiguration.logger)
      if !["127.0.0.1", "::1", "localhost"].contains(host) {
        FileHandle.standardError.write(
          Data(
            "mediacache: warning: listening on \(host), not loopback: other machines can use this proxy\n"
              .utf8))
      }
      do {
        try await server.run(shutdownSignals: [.sigterm, .sigint]) { endpoint in
          printOut("listening on \(endpoint)")
          for upstream in server.configuration.upstreams {
            printOut("upstream \(upstream.shownPrefix) -> \(upstream.base)")
          }
        }
      } catch {
        try? await reader.client.shutdown()
        throw fail("cannot serve on \(host):\(port): \(error)", .failure)
      }
      // Reads that ended last hand their commits to the I/O executor, and flights still ending (a read can end
      // before its flight does) are cancelled and their objects closed: all of it commits before the process
      // ends. The preloader stops first, so that it starts no fetch meanwhile.
      await server.preloader.stopAndWait()
      await reader.finishOpenObjects()
      try? await reader.client.shutdown()
    }
  }
}

/// `--max-foreground-requests` and `--max-background-requests-per-host` (proxy and fetch).
struct RequestLimitOptions: ParsableArguments {
  @Option(
    help: ArgumentHelp(
      "Origin requests players may have running at once in this process (default: no limit).",
      discussion: "A limit makes a player wait for a slot whenever more objects than this are read at once.",
      valueName: "N"))
  var maxForegroundRequests: Int?
  @Option(
    help: ArgumentHelp(
      "Background origin requests (prefetch, fetch --hls) at once per origin host; they yield to players.",
      valueName: "N"))
  var maxBackgroundRequestsPerHost = 6
  @Option(
    help: ArgumentHelp(
      "The most bytes per second all background work (prefetch, fetch --hls/--dash, preload) takes from origins.",
      discussion: "Bytes or a size such as 512K or 2M; players are never slowed. Default: no limit.",
      valueName: "SIZE"))
  var backgroundRate: ByteSizeArgument?

  func validate() throws {
    if let cap = maxForegroundRequests, cap < 1 {
      throw ValidationError("--max-foreground-requests must be at least 1, not \(cap)")
    }
    if maxBackgroundRequestsPerHost < 1 {
      throw ValidationError(
        "--max-background-requests-per-host must be at least 1, not \(maxBackgroundRequestsPerHost)")
    }
    if let rate = backgroundRate, rate.bytes < 1 {
      throw ValidationError("--background-rate must be at least 1 byte per second, not \(rate)")
    }
  }

  func configuration(maxRetries: Int = 3) -> CachingReader.Configuration {
    var configuration = CachingReader.Configuration(
      maxForegroundRequests: maxForegroundRequests,
      maxBackgroundRequestsPerHost: maxBackgroundRequestsPerHost,
      maxRetries: maxRetries)
    configuration.backgroundBytesPerSecond = backgroundRate?.bytes
    return configuration
  }
}
