import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A `mediacache proxy` process over a fresh cache directory, reading from a fresh test origin.
///
/// The proxy runs as the real binary rather than in this process: its request handling runs on Swift's
/// cooperative pool, which other tests in this process may hold with blocking waits; in a process of its own it
/// is measured as players meet it.
struct ProxyFixture: Sendable {
  let origin: TestOrigin
  let endpoint: ProxyServer.Endpoint
  let directory: String

  /// The proxied path of an origin URL, for `RawHTTPConnection.sendRequest`.
  func path(_ originURL: String) -> String { ProxyServer.proxyPath(for: originURL) }

  /// One request through the proxy on a fresh connection (on a thread of its own).
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

/// Runs `body` with a `mediacache proxy` process (port 0, `arguments` added) and a test origin, both stopped
/// afterwards; the proxy must exit 0 on SIGTERM.
func withProxy<T>(
  fileRoot: String? = nil, arguments: [String] = ["--retries", "1"],
  _ body: (ProxyFixture) async throws -> T
) async throws -> T {
  let directory = try TemporaryDirectory()
  defer { directory.cleanup() }
  let origin = try await TestOrigin.start(fileRoot: fileRoot)
  let proxy: ProxyProcess
  do {
    proxy = try await ProxyProcess(cache: directory.path, arguments)
  } catch {
    try? await origin.shutdown()
    throw error
  }
  let fixture = ProxyFixture(
    origin: origin, endpoint: .init(host: "127.0.0.1", port: proxy.port), directory: directory.path)
  do {
    let result = try await body(fixture)
    let exit = await proxy.stop()
    #expect(exit.status == 0, "proxy exit: \(exit.stderr)")
    try? await origin.shutdown()
    return result
  } catch {
    _ = await proxy.stop(SIGKILL)
    try? await origin.shutdown()
    throw error
  }
}
