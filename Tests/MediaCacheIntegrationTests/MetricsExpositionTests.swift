import Foundation
import MediaCacheTestSupport
import Testing

/// The proxy's `/metrics` passes Prometheus's own linter (`promtool check metrics`: the text format, HELP and
/// TYPE lines, counter names ending in `_total`) after a miss, a hit and an origin failure.
@Suite struct MetricsExpositionTests {
  /// `promtool check metrics` on `text`: its exit status and what it printed.
  func promtool(_ text: String, in directory: String) throws -> CommandResult {
    let file = "\(directory)/metrics-\(UUID().uuidString).txt"
    try text.write(toFile: file, atomically: true, encoding: .utf8)
    return try run("/bin/sh", ["-c", "/usr/bin/promtool check metrics < '\(file)' 2>&1"])
  }

  @Test func promtoolFindsNothingToSay() async throws {
    try await withOriginAndProxy { origin, _, port, directory in
      let object = "/http/127.0.0.1:\(origin.port)/normal/counted?size=200000"
      for path in [object, object, "/http/127.0.0.1:\(origin.port)/normal/refused"] {
        _ = try await blocking { try rawRequest(port: port, path) }
      }
      let text = String(
        decoding: try await blocking { try rawRequest(port: port, "/metrics") }.body, as: UTF8.self)
      #expect(text.contains("mediacache_proxy_cache_hits_total 1\n"), "\(text)")
      let checked = try promtool(text, in: directory)
      #expect(checked.status == 0 && checked.text.isEmpty, "\(checked.text)")
      // The check can fail: a counter without `_total`.
      let broken = try promtool("# HELP foo x\n# TYPE foo counter\nfoo 1\n", in: directory)
      #expect(broken.status != 0 && broken.text.contains("_total"), "\(broken.text)")
    }
  }
}
