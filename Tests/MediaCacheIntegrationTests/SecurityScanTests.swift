import Foundation
import MediaCache
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// After real use of a cache (fetches, the proxy, imports, pins, purges, a compactor pass, a repair), no file of
/// it holds a plain key or URL (the store keeps SHA-256 ids only), every file is mode 0600 and every directory
/// 0700 (docs/FORMAT.md section 1).
@Suite(.serialized) struct SecurityScanTests {
  let mediacache = binary("mediacache")

  @Test func noPlainURLOnDiskAndOwnerOnlyModes() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let cache = directory.file("cache")  // created by the first command
    let size = 700_000
    let fetched = origin.url(.normal, "scan-fetched", size: size, query: "token=Tok3nFetched&Expires=1")
    let signed = origin.url(.normal, "scan-signed", size: size, query: "Signature=S1gnedValue")
    let proxied = origin.url(.normal, "scan-proxied", size: size, query: "session=Sess1onProxied")
    let imported = "https://private.example/scan/imported.mp4?key=1mportedKey"

    #expect(
      try await run(mediacache, ["fetch", "--cache", cache, "--chunk-size", "65536", fetched]).status == 0)
    let signedFetch = try await run(
      mediacache, ["fetch", "--cache", cache, "--ignore-query", "Signature", signed])
    #expect(signedFetch.status == 0, "\(signedFetch.stderr)")
    let proxy = try await ProxyProcess(cache: cache)
    let response = try proxy.request(ProxyServer.proxyPath(for: proxied))
    #expect(response.status == 200)
    #expect(await proxy.stop().status == 0)
    let source = directory.file("source.bin")
    try randomBytes(count: size, seed: 5).write(to: URL(fileURLWithPath: source))
    #expect(try await run(mediacache, ["import", "--cache", cache, imported, source]).status == 0)
    #expect(try await run(mediacache, ["pin", "--cache", cache, imported]).status == 0)
    #expect(try await run(mediacache, ["purge", "--cache", cache, "--max-size", "1G"]).status == 0)
    #expect(try await run(binary("cache-compactor"), [cache, "--scrub", "1G"]).status == 0)
    #expect(try await run(binary("cache-fsck"), [cache, "--repair"]).status == 0)

    var needles: [String] = []
    for url in [fetched, signed, proxied, imported] {
      let components = try #require(URLComponents(string: url))
      needles += [url, components.path, components.percentEncodedQuery ?? "", components.host ?? ""]
      needles += (components.queryItems ?? []).compactMap(\.value)
    }
    needles.append("\(origin.host):\(origin.port)")
    needles = needles.filter { $0.count >= 8 }
    let scan = try scanTree(cache, for: needles)
    #expect(scan.files >= 10, "scanned \(scan.files) files")
    #expect(scan.problems.isEmpty, "\(scan.problems.joined(separator: "\n"))")
  }

  /// Walks `root` without following symlinks: every directory must be 0700, every file a regular file of mode
  /// 0600 that contains none of `needles`.
  func scanTree(_ root: String, for needles: [String]) throws -> (files: Int, problems: [String]) {
    var problems: [String] = []
    var files = 0
    let patterns = needles.map { Data($0.utf8) }
    func walk(_ path: String) throws {
      var info = stat()
      guard lstat(path, &info) == 0 else { return problems.append("\(path): lstat failed") }
      let mode = info.st_mode & 0o7777
      switch info.st_mode & S_IFMT {
      case S_IFDIR:
        if mode != 0o700 { problems.append("directory \(path) has mode \(String(mode, radix: 8))") }
        for name in try FileManager.default.contentsOfDirectory(atPath: path) { try walk("\(path)/\(name)") }
      case S_IFREG:
        files += 1
        if mode != 0o600 { problems.append("file \(path) has mode \(String(mode, radix: 8))") }
        let content = try Data(contentsOf: URL(fileURLWithPath: path))
        for (needle, pattern) in zip(needles, patterns) where content.range(of: pattern) != nil {
          problems.append("file \(path) contains '\(needle)'")
        }
      default:
        problems.append("\(path) is neither a file nor a directory")
      }
    }
    try walk(root)
    return (files, problems)
  }
}
