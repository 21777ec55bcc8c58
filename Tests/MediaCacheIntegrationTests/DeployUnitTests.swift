import Foundation
import MediaCacheTestSupport
import Testing

/// `deploy/systemd`: the units pass `systemd-analyze verify` with nothing to say (a warning fails), and their
/// `ExecStart` command lines run as written against the built executables (a cache directory and port of the
/// test's own): the compactor completes a pass, the proxy listens and stops cleanly on SIGTERM.
@Suite struct DeployUnitTests {
  let units = ["mediacache-proxy.service", "cache-compactor.service", "cache-compactor.timer"]
  let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("deploy/systemd").path

  /// The unit's text with `/usr/local/bin/` pointing at the built executables.
  func unit(_ name: String) throws -> String {
    try String(contentsOfFile: "\(source)/\(name)", encoding: .utf8)
      .replacingOccurrences(of: "/usr/local/bin/", with: productsDirectory.path + "/")
  }

  /// The words of the unit's `ExecStart` (none of them is quoted).
  func execStart(_ name: String, cache: String) throws -> [String] {
    let line = try #require(try unit(name).split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
    return line.dropFirst("ExecStart=".count).split(separator: " ").map {
      $0 == "/var/cache/mediacache" ? cache : String($0)
    }
  }

  @Test func theUnitsVerifyWithoutAWarning() async throws {
    try await withTemporaryDirectory { directory in
      for name in units {
        try unit(name).write(toFile: "\(directory)/\(name)", atomically: true, encoding: .utf8)
      }
      let result = try await run(
        "/usr/bin/systemd-analyze", ["verify", "--man=no"] + units.map { "\(directory)/\($0)" })
      #expect(
        result.status == 0 && result.stderr.isEmpty && result.text.isEmpty, "\(result.text)\(result.stderr)")
      // The check can fail: a value systemd does not know is a warning.
      let broken = try unit(units[0]).replacingOccurrences(
        of: "ProtectSystem=strict", with: "ProtectSystem=bogus")
      try broken.write(toFile: "\(directory)/\(units[0])", atomically: true, encoding: .utf8)
      let warned = try await run(
        "/usr/bin/systemd-analyze", ["verify", "--man=no", "\(directory)/\(units[0])"])
      #expect(warned.stderr.contains("bogus"), "\(warned.stderr)")
    }
  }

  @Test func theCommandLinesRunAsWritten() async throws {
    try await withTemporaryDirectory { directory in
      let cache = "\(directory)/cache"
      let proxyWords = try execStart("mediacache-proxy.service", cache: cache).map { $0 == "8089" ? "0" : $0 }
      let proxy = try ChildProcess(proxyWords[0], Array(proxyWords.dropFirst()))
      #expect(await proxy.waitForLine(timeout: 30) { $0.hasPrefix("listening on http://127.0.0.1:") })
      proxy.kill(SIGTERM)
      #expect(await proxy.wait(timeout: 15).status == 0)

      let compactorWords = try execStart("cache-compactor.service", cache: cache)
      let pass = try await run(compactorWords[0], Array(compactorWords.dropFirst()))
      #expect(pass.status == 0, "\(pass.stderr)")
      #expect(pass.text.hasPrefix("{") && pass.text.contains("\"evictedCount\":0"), "\(pass.text)")
    }
  }
}
