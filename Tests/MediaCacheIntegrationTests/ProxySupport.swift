import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Runs blocking work (a socket client, a child process) on a Dispatch thread, so it never holds one of the
/// few threads of Swift's cooperative pool that the in-process proxy needs to answer it.
func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
  }
}

/// An in-process proxy over a fresh cache directory, reading from a fresh test origin.
struct ProxyFixture: Sendable {
  let origin: TestOrigin
  let proxy: ProxyServer
  let endpoint: ProxyServer.Endpoint
  let directory: String

  /// The proxied path of an origin URL, for `RawHTTPConnection.sendRequest`.
  func path(_ originURL: String) -> String { ProxyServer.proxyPath(for: originURL) }

  /// One request through the proxy on a fresh connection (on a Dispatch thread).
  func request(_ path: String, method: String = "GET", headers: [(String, String)] = []) async throws
    -> RawHTTPResponse
  {
    let port = endpoint.port
    return try await blocking {
      let connection = try RawHTTPConnection(port: port)
      defer { connection.close() }
      try connection.sendRequest(method, path, headers: headers)
      return try connection.readResponse(method: method)
    }
  }

  /// The proxy's `/metrics` value of `name` (with its label set, e.g. `x{source="cache"}`).
  func metric(_ name: String) async throws -> Double? {
    let text = String(decoding: try await request("/metrics").body, as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
      return Double(line.dropFirst(name.count + 1))
    }
    return nil
  }
}

extension RawHTTPResponse: @unchecked Sendable {}

/// Runs `body` with a proxy started in this process on port 0, stopped afterwards.
func withProxy<T>(
  fileRoot: String? = nil, allowedHosts: Set<String>? = nil,
  clientConfiguration: OriginClient.Configuration = .init(),
  readerConfiguration: CachingReader.Configuration = .init(maxRetries: 1, retryBaseDelay: 0.01),
  _ body: (ProxyFixture) async throws -> T
) async throws -> T {
  let directory = try TemporaryDirectory()
  defer { directory.cleanup() }
  let origin = try await TestOrigin.start(fileRoot: fileRoot)
  let cache = try MediaCache(configuration: .init(directory: directory.path, maxSize: nil))
  let client = OriginClient(configuration: clientConfiguration)
  let reader = CachingReader(cache: cache, client: client, configuration: readerConfiguration)
  let proxy = ProxyServer(reader: reader, configuration: .init(allowedHosts: allowedHosts))
  let (endpoints, continuation) = AsyncStream.makeStream(of: ProxyServer.Endpoint.self)
  let server = Task { try await proxy.run { continuation.yield($0) } }
  var iterator = endpoints.makeAsyncIterator()
  guard let endpoint = await iterator.next() else { throw RawHTTPError(description: "proxy did not start") }
  let fixture = ProxyFixture(origin: origin, proxy: proxy, endpoint: endpoint, directory: directory.path)
  do {
    let result = try await body(fixture)
    server.cancel()
    _ = await server.result
    try? await client.shutdown()
    try? await origin.shutdown()
    return result
  } catch {
    server.cancel()
    _ = await server.result
    try? await client.shutdown()
    try? await origin.shutdown()
    throw error
  }
}
