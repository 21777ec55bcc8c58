import Foundation
import MediaCacheTestSupport

/// Runs `mediacache proxy` on port 0 with `arguments` and `environment` (added to this process's), returning
/// it and its port once it prints its address.
func startProxy(cache: String, _ arguments: [String], environment: [String: String] = [:]) throws
  -> (ChildProcess, Int)
{
  let child = try ChildProcess(
    binary("mediacache"), ["proxy", "--cache", cache, "--port", "0"] + arguments,
    environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
  let prefix = "listening on http://127.0.0.1:"
  guard child.waitForLine(timeout: 30, { $0.hasPrefix(prefix) }),
    let line = child.outputSoFar.split(separator: "\n").first, let port = Int(line.dropFirst(prefix.count))
  else {
    let result = child.wait(timeout: 5)
    throw RawHTTPError(description: "proxy did not start: \(result.stderr)")
  }
  return (child, port)
}
