import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy

struct ProxyCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "proxy",
    abstract: "Serve media to players over local HTTP, through the cache.",
    discussion: """
      Prints "listening on http://HOST:PORT" as its first line, then serves until SIGINT or SIGTERM. A player \
      reads http://HOST:PORT/NAME?url=ORIGIN-URL, with ORIGIN-URL percent-encoded; NAME is free (give the \
      file name so the player can tell the type). Range requests are answered from the cache, gaps are fetched \
      from the origin and cached as they stream; HLS playlists are rewritten so segments go through the proxy \
      too. GET /metrics gives Prometheus counters.

      Example:
        mediacache proxy --port 8089 &
        ffplay "http://127.0.0.1:8089/movie.mp4?url=https%3A%2F%2Fexample.com%2Fmovie.mp4"
      """)

  @OptionGroup var cache: CacheOptions
  @Option(help: "Address to listen on. Anything but loopback lets other machines use the proxy.")
  var host = "127.0.0.1"
  @Option(help: "Port to listen on (0: any free port, shown in the first line).") var port = 0
  @Option(
    name: .customLong("allow-host"),
    help: "Only fetch from this origin host (repeat for several). Default: any host.")
  var allowedHosts: [String] = []
  @Option(help: "Evict least recently used objects to keep the cache under this many bytes.")
  var maxSize: Int64?
  @Option(help: "durable (fsync data before each manifest commit) or relaxed.") var durability: Durability =
    .durable

  func validate() throws {
    guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
    if let maxSize, maxSize <= 0 { throw ValidationError("--max-size must be positive") }
  }

  func run() async throws {
    try await reportingErrors {
      var configuration = MediaCache.Configuration(
        directory: cache.directory ?? MediaCache.Configuration.defaultDirectory(), durability: durability,
        commitPolicy: .init(bytes: 32 << 20, interval: 1), maxSize: maxSize, maxAge: nil)
      configuration.createDirectory = true
      let mediaCache = try MediaCache(configuration: configuration)
      let reader = CachingReader(cache: mediaCache)
      let server = ProxyServer(
        reader: reader,
        configuration: .init(
          host: host, port: port, allowedHosts: allowedHosts.isEmpty ? nil : Set(allowedHosts)))
      if !["127.0.0.1", "::1", "localhost"].contains(host) {
        FileHandle.standardError.write(
          Data(
            "mediacache: warning: listening on \(host), not loopback: other machines can use this proxy\n"
              .utf8))
      }
      do {
        try await server.run(shutdownSignals: [.sigterm, .sigint]) { endpoint in
          printOut("listening on \(endpoint)")
        }
      } catch {
        try? await reader.client.shutdown()
        throw fail("cannot serve on \(host):\(port): \(error)", .failure)
      }
      try? await reader.client.shutdown()
    }
  }
}
