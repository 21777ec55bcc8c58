import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// `mediacache proxy --log-level info`: one logfmt line per request on standard error, saying whether its bytes
/// came from the cache, and never a URL's query (where signatures travel); origin failures at `warning` with
/// their cause, also without the query. At the default level, no request line.
@Suite struct AccessLogTests {
  let signature = "sig-9d1e77"

  /// The `key=value` fields of a logfmt line (values without spaces, as these are).
  func fields(_ line: Substring) -> [String: String] {
    Dictionary(
      line.split(separator: " ").compactMap { part -> (String, String)? in
        guard let equals = part.firstIndex(of: "=") else { return nil }
        return (String(part[..<equals]), String(part[part.index(after: equals)...]))
      }, uniquingKeysWith: { $1 })
  }

  @Test func eachRequestIsOneLineWithoutItsQuery() async throws {
    try await withOriginAndProxy(["--log-level", "info"]) { origin, proxy, port, _ in
      let path = "/http/127.0.0.1:\(origin.port)/normal/logged?size=300000&sig=\(signature)"
      let requests: [(headers: [(String, String)], status: Int, cache: String, bytes: Int)] = [
        ([("Range", "bytes=0-99999")], 206, "miss", 100_000),
        ([("Range", "bytes=0-99999")], 206, "hit", 100_000),
        ([], 200, "partial", 300_000),
      ]
      for request in requests {
        let response = try await blocking { try rawRequest(port: port, path, headers: request.headers) }
        #expect(response.status == request.status && response.body.count == request.bytes)
      }
      // The origin refuses this one (no size): a warning with the cause, and a request line.
      let failing = "/http/127.0.0.1:\(origin.port)/normal/refused?sig=\(signature)"
      #expect(try await blocking { try rawRequest(port: port, failing) }.status == 400)
      var lines: [Substring] = []
      for _ in 0..<100 {
        lines = proxy.errorsSoFar.split(separator: "\n")
        if lines.filter({ $0.contains("msg=request") }).count >= 4
          && lines.contains(where: { $0.contains("level=warning") })
        {
          break
        }
        try await Task.sleep(for: .milliseconds(50))
      }
      let access = lines.filter { $0.contains("logger=mediacache.proxy") && $0.contains("msg=request") }
      #expect(access.count == 4, "\(lines)")
      for (line, request) in zip(access, requests) {
        let field = fields(line)
        #expect(field["level"] == "info" && field["method"] == "GET", "\(line)")
        #expect(field["path"] == "/http/127.0.0.1:\(origin.port)/normal/logged", "\(line)")
        #expect(field["status"] == "\(request.status)" && field["bytes"] == "\(request.bytes)", "\(line)")
        #expect(field["cache"] == request.cache, "\(line)")
        #expect(field["object"]?.count == 64 && Double(field["duration_ms"] ?? "") != nil, "\(line)")
      }
      #expect(fields(access[0])["origin_bytes"] == "100000" && fields(access[1])["origin_bytes"] == "0")
      #expect(fields(access[0])["origin_requests"] == "1" && fields(access[1])["origin_requests"] == "0")
      let warning = try #require(lines.first { $0.contains("level=warning") })
      #expect(warning.contains("origin failed") && warning.contains("HTTP 400"), "\(warning)")
      #expect(!lines.contains { $0.contains(signature) }, "\(lines.filter { $0.contains(signature) })")
    }
  }

  /// A response cut mid-body by its origin (half the body, then the connection closed; no retry): its request
  /// line with the bytes sent, and a warning with the cause (both went unlogged), without the query.
  @Test func aResponseCutMidBodyIsLoggedWithItsCause() async throws {
    try await withOriginAndProxy(["--log-level", "info", "--retries", "0"]) { origin, proxy, port, _ in
      let path = "/http/127.0.0.1:\(origin.port)/truncated/cut-log?size=300000&sig=\(signature)"
      _ = try? await blocking { try rawRequest(port: port, path) }
      var lines: [Substring] = []
      for _ in 0..<100 {
        lines = proxy.errorsSoFar.split(separator: "\n")
        if lines.contains(where: { $0.contains("msg=request") && $0.contains("cut-log") })
          && lines.contains(where: { $0.contains("response cut") })
        {
          break
        }
        try await Task.sleep(for: .milliseconds(50))
      }
      let access = try #require(
        lines.first { $0.contains("msg=request") && $0.contains("cut-log") }, "\(lines)")
      let field = fields(access)
      #expect(field["status"] == "200", "\(access)")
      #expect(Int(field["bytes"] ?? "") ?? 300_000 < 300_000, "\(access)")
      let warning = try #require(lines.first { $0.contains("response cut") }, "\(lines)")
      #expect(warning.contains("level=warning") && warning.contains("cut-log"), "\(warning)")
      #expect(warning.contains("body ended after"), "\(warning)")
      #expect(!lines.contains { $0.contains(signature) }, "\(lines.filter { $0.contains(signature) })")
    }
  }

  @Test func theDefaultLevelLogsNoRequestLine() async throws {
    try await withOriginAndProxy { origin, proxy, port, _ in
      let path = "/http/127.0.0.1:\(origin.port)/normal/quiet?size=1000"
      #expect(try await blocking { try rawRequest(port: port, path) }.status == 200)
      try await Task.sleep(for: .milliseconds(300))
      #expect(!proxy.errorsSoFar.contains("msg=request"), "\(proxy.errorsSoFar)")
      let bad = try await run(binary("mediacache"), ["proxy", "--log-level", "loud", "--port", "0"])
      #expect(bad.status == 64 && bad.stderr.contains("--log-level 'loud' is not a level"), "\(bad.stderr)")
    }
  }
}
