import MediaCacheHTTP
import MediaCacheProxy
import Testing

/// A `ProxyServer` in this process over `reader`, running in a task, once it listens: the server (for its
/// metrics), where it listens, and the task (cancel it to stop the server). Throws the server's error if it
/// stopped without listening.
func startInProcessProxy(_ reader: CachingReader, _ configuration: ProxyServer.Configuration = .init())
  async throws -> (proxy: ProxyServer, endpoint: ProxyServer.Endpoint, server: Task<Void, any Error>)
{
  let proxy = ProxyServer(reader: reader, configuration: configuration)
  let (endpoints, continuation) = AsyncStream.makeStream(of: ProxyServer.Endpoint.self)
  let server = Task {
    defer { continuation.finish() }
    try await proxy.run { continuation.yield($0) }
  }
  var iterator = endpoints.makeAsyncIterator()
  guard let endpoint = await iterator.next() else {
    try await server.value
    throw CancellationError()
  }
  return (proxy, endpoint, server)
}
