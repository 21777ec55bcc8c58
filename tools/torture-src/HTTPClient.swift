import Foundation
import MediaCacheTestOrigin

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What one GET through the proxy gave.
struct ProxyGet {
  /// The status code, nil if no response head arrived (connection refused or cut: the proxy was killed).
  var status: Int?
  /// Body bytes received, every one compared with the origin's byte at its offset.
  var bodyBytes: Int64 = 0
  /// The body ended as Content-Length said.
  var complete = false
  /// The first wrong byte (object offset), if any: the one thing that must never happen.
  var wrongByteAt: Int64?
  /// A transport error (connect refused, reset, timeout) or a malformed response.
  var error: String?
  /// The response's ETag (nil: none, or no head).
  var etag: String?
}

/// The proxied path of an origin URL: `/<name>?url=<percent-encoded URL>` (see ProxyServer.proxyPath).
func proxyPath(for url: String) -> String { "/media?url=\(percentEncode(url))" }

/// GETs `range` (nil: the whole object) of `object` through the proxy on `port` with a blocking socket, checking
/// each body byte against the origin as it arrives (so bytes received before the proxy dies count too), in the
/// version the response's ETag names, which must be the object's. `receiveTimeout` makes a hang an error instead
/// of a stuck driver.
func proxyGet(port: Int, _ object: OriginObject, range: Range<Int64>?, receiveTimeout: Int = 60) -> ProxyGet {
  let request = SoakRequest(
    target: proxyPath(for: object.url), range: range.map { "bytes=\($0.lowerBound)-\($0.upperBound - 1)" },
    object: (object.name, object.size), versionWithoutETag: object.version)
  let answer = soakGet(port: port, request, receiveTimeout: receiveTimeout)
  var result = ProxyGet(
    status: answer.status, bodyBytes: answer.bodyBytes, complete: answer.complete,
    wrongByteAt: answer.wrongByteAt,
    error: answer.failure.map { "\($0.rawValue): \(answer.detail)" }, etag: answer.etag)
  if let version = answer.version, version != object.version {
    result.complete = false
    result.error = "ETag of version \(version), not \(object.version)"
  }
  return result
}

func headEnd(_ bytes: [UInt8]) -> Int? {
  guard bytes.count >= 4 else { return nil }
  for index in 0...(bytes.count - 4)
  where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
    return index + 4
  }
  return nil
}

/// A running `mediacache proxy`.
struct ProxyProcess {
  let child: Child
  let port: Int

  /// Starts the proxy on `port` (0: any free port) and waits (up to 60 s) for its `listening on` line.
  static func start(_ binaries: Binaries, cache: String, port: Int = 0, extra: [String] = [], log: CommandLog)
    throws -> ProxyProcess
  {
    let paths = log.paths("proxy")
    let child = try Child(
      binaries.mediacache, ["proxy", "--cache", cache, "--port", "\(port)"] + extra, stdout: paths.out,
      stderr: paths.err
    )
    let prefix = "listening on http://127.0.0.1:"
    let deadline = monotonicSeconds() + 60
    while monotonicSeconds() < deadline {
      if let line = child.stdoutText.split(separator: "\n").first, line.hasPrefix(prefix),
        let port = Int(line.dropFirst(prefix.count))
      {
        return ProxyProcess(child: child, port: port)
      }
      if let outcome = child.poll() {
        throw TortureError("mediacache proxy ended before listening (\(outcome)): \(child.stderrText)")
      }
      usleep(5000)
    }
    child.killNow()
    throw TortureError("mediacache proxy printed no 'listening on' line in 60 s")
  }
}
