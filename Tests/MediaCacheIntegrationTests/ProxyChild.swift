import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport

/// Runs `mediacache proxy` on port 0 with `arguments` and `environment` (added to this process's), returning
/// it and its port once it prints its address.
func startProxy(cache: String, _ arguments: [String], environment: [String: String] = [:]) async throws
  -> (ChildProcess, Int)
{
  let child = try ChildProcess(
    binary("mediacache"), ["proxy", "--cache", cache, "--port", "0"] + arguments,
    environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
  let prefix = "listening on http://127.0.0.1:"
  guard await child.waitForLine(timeout: 30, { $0.hasPrefix(prefix) }),
    let line = child.outputSoFar.split(separator: "\n").first, let port = Int(line.dropFirst(prefix.count))
  else {
    let result = await child.wait(timeout: 5)
    throw RawHTTPError(description: "proxy did not start: \(result.stderr)")
  }
  return (child, port)
}

/// Runs `body` with a fresh test origin and a `mediacache proxy` child (`arguments`) on a cache in a temporary
/// directory: the origin, the proxy process, its port and the directory. The proxy is killed afterwards.
func withOriginAndProxy(
  _ arguments: [String] = [], _ body: (TestOrigin, ChildProcess, Int, String) async throws -> Void
) async throws {
  try await withTemporaryDirectory { directory in
    try await withOrigin { origin in
      let (proxy, port) = try await startProxy(cache: "\(directory)/cache", arguments)
      defer { proxy.kill() }
      try await body(origin, proxy, port, directory)
    }
  }
}
