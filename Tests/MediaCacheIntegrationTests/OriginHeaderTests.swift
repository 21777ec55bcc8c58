import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheStreaming
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Synchronization
import Testing

/// Origins that need credentials: `--origin-header` on `fetch` and `proxy`, the library's per-request header
/// hook, the shared cache's storage rule for responses to requests with credentials (RFC 9111 3.5), and the
/// secret's absence from every log line and file of the cache.
@Suite struct OriginHeaderTests {
  let secret = "s3cret-token-4711"
  let size = 300_000

  /// Every file under `directory`, read whole: none may hold `secret`.
  func filesHolding(_ secret: String, under directory: String) -> [String] {
    let enumerator = FileManager.default.enumerator(atPath: directory)
    var found: [String] = []
    while let path = enumerator?.nextObject() as? String {
      let data = FileManager.default.contents(atPath: "\(directory)/\(path)") ?? Data()
      if data.range(of: Data(secret.utf8)) != nil { found.append(path) }
    }
    return found
  }

  @Test func fetchSendsTheHeaderAndNeverWritesIt() async throws {
    try await withTemporaryDirectory { directory in
      try await withOrigin { origin in
        let cache = "\(directory)/cache"
        let url = origin.url(.normal, "private", size: size, query: "auth=\(secret)")
        let refused = try await run(binary("mediacache"), ["fetch", "--cache", cache, url])
        #expect(refused.status != 0 && refused.stderr.contains("HTTP 401"), "\(refused.stderr)")
        let fetched = try await run(
          binary("mediacache"),
          ["fetch", "--cache", cache, "--origin-header", "Authorization: Bearer \(secret)", url])
        #expect(fetched.status == 0, "\(fetched.stderr)")
        let cat = try await run(binary("mediacache"), ["cat", "--cache", cache, url])
        #expect(Array(cat.stdout) == TestOrigin.bytes(name: "private", size: size))
        let sent = origin.requests(for: "private").filter { $0.status == 200 || $0.status == 206 }
        #expect(!sent.isEmpty && sent.allSatisfy { $0.headers["authorization"] == "Bearer \(secret)" })
        // An app's cache (fetch): stored without any Cache-Control. The secret is in no file and no output.
        #expect(filesHolding(secret, under: cache).isEmpty)
        // (The test origin takes the token in the URL's query too: the URL may be printed, nothing else.)
        let printed = (fetched.text + fetched.stderr).replacingOccurrences(of: url, with: "")
        #expect(!printed.contains(secret), "\(printed)")
      }
    }
  }

  /// `--origin-headers-file` keeps the secret off the command line; a bad line is named by its number.
  @Test func headersComeFromAFileToo() async throws {
    try await withTemporaryDirectory { directory in
      try await withOrigin { origin in
        let file = "\(directory)/headers"
        try "# origin credentials\n\nAuthorization: Bearer \(secret)\r\nX-Extra: 1\n".write(
          toFile: file, atomically: true, encoding: .utf8)
        let url = origin.url(.normal, "from-file", size: size, query: "auth=\(secret)")
        let fetched = try await run(
          binary("mediacache"),
          ["fetch", "--cache", "\(directory)/cache", "--origin-headers-file", file, url])
        #expect(fetched.status == 0, "\(fetched.stderr)")
        let sent = origin.requests(for: "from-file").filter { $0.status == 206 || $0.status == 200 }
        #expect(!sent.isEmpty && sent.allSatisfy { $0.headers["x-extra"] == "1" })
        try "X-Extra: 1\nAuthorization \(secret)\n".write(toFile: file, atomically: true, encoding: .utf8)
        let refused = try await run(
          binary("mediacache"),
          ["fetch", "--cache", "\(directory)/cache", "--origin-headers-file", file, url])
        #expect(
          refused.status == 64 && refused.stderr.contains("line 2: an origin header"), "\(refused.stderr)")
        #expect(!refused.stderr.contains(secret))
      }
    }
  }

  @Test func theSharedProxyStoresCredentialedResponsesOnlyWhenThePublicMayShareThem() async throws {
    try await withTemporaryDirectory { directory in
      try await withOrigin { origin in
        let cache = "\(directory)/cache"
        let header = ["--origin-header", "Authorization: Bearer \(secret)"]
        let (proxy, port) = try await startProxy(cache: cache, header)
        defer { proxy.kill() }
        let (originPort, size, secret) = (origin.port, size, secret)
        @Sendable func path(_ name: String, _ query: String) -> String {
          "/http/127.0.0.1:\(originPort)/normal/\(name)?size=\(size)&auth=\(secret)\(query)"
        }
        // Marked public: cached, and a second read comes from the cache.
        let shared = try await blocking {
          try rawRequest(port: port, path("shared", "&cache-control=public"))
        }
        #expect(shared.status == 200 && Array(shared.body) == TestOrigin.bytes(name: "shared", size: size))
        let before = origin.requests(for: "shared").count
        let again = try await blocking { try rawRequest(port: port, path("shared", "&cache-control=public")) }
        #expect(again.status == 200 && again.body == shared.body)
        #expect(origin.requests(for: "shared").count == before)
        // Not marked: a shared cache may not store it, so it is relayed from the origin and not stored.
        let unmarked = try await blocking { try rawRequest(port: port, path("unmarked", "")) }
        #expect(
          unmarked.status == 200 && Array(unmarked.body) == TestOrigin.bytes(name: "unmarked", size: size))
        #expect(unmarked.header("Cache-Status") == "MediaCache; fwd=miss; detail=not-storable")
        let status = try await run(
          binary("mediacache"),
          ["status", "--cache", cache, origin.url(.normal, "unmarked", size: size, query: "auth=\(secret)")])
        #expect(!status.text.contains("complete") && !status.text.contains("partial"), "\(status.text)")
        #expect(filesHolding(secret, under: cache).isEmpty)
        proxy.kill(SIGTERM)
        let result = await proxy.wait(timeout: 10)
        // Nothing printed holds it, but in the URLs (the test origin takes the token in the query too).
        let printed = (result.text + result.stderr).replacingOccurrences(of: "auth=\(secret)", with: "")
        #expect(!printed.contains(secret), "\(printed)")
      }
    }
  }

  /// `--forward-header Authorization`: a player's own token reaches the origin; without the option it does
  /// not (the origin's 401 is passed on); the shared proxy's storage rule holds for forwarded credentials too.
  @Test func aPlayersOwnHeaderIsForwardedWhenAsked() async throws {
    try await withTemporaryDirectory { directory in
      try await withOrigin { origin in
        let token = [("Authorization", "Bearer \(secret)")]
        let (forwarding, port) = try await startProxy(
          cache: "\(directory)/forwarding", ["--forward-header", "Authorization"])
        defer { forwarding.kill() }
        let (plain, plainPort) = try await startProxy(cache: "\(directory)/plain", [])
        defer { plain.kill() }
        let (originPort, size, secret) = (origin.port, size, secret)
        @Sendable func path(_ name: String, _ query: String) -> String {
          "/http/127.0.0.1:\(originPort)/normal/\(name)?size=\(size)&auth=\(secret)\(query)"
        }
        let shared = try await blocking {
          try rawRequest(port: port, path("forwarded", "&cache-control=public"), headers: token)
        }
        #expect(shared.status == 200 && Array(shared.body) == TestOrigin.bytes(name: "forwarded", size: size))
        let sent = origin.requests(for: "forwarded").filter { $0.status == 200 || $0.status == 206 }
        #expect(!sent.isEmpty && sent.allSatisfy { $0.headers["authorization"] == "Bearer \(secret)" })
        let unforwarded = try await blocking {
          try rawRequest(port: plainPort, path("unforwarded", "&cache-control=public"), headers: token)
        }
        #expect(unforwarded.status == 401)
        #expect(origin.requests(for: "unforwarded").allSatisfy { $0.headers["authorization"] == nil })
        let unmarked = try await blocking { try rawRequest(port: port, path("unmarked", ""), headers: token) }
        #expect(
          unmarked.status == 200 && Array(unmarked.body) == TestOrigin.bytes(name: "unmarked", size: size))
        #expect(unmarked.header("Cache-Status") == "MediaCache; fwd=miss; detail=not-storable")
        let bad = try await run(binary("mediacache"), ["proxy", "--forward-header", "Range", "--port", "0"])
        #expect(bad.status == 64 && bad.stderr.contains("the cache sets this field itself"), "\(bad.stderr)")
      }
    }
  }

  @Test func aPrivateProxyStoresWhatItsCredentialsFetch() async throws {
    try await withTemporaryDirectory { directory in
      try await withOrigin { origin in
        let (proxy, port) = try await startProxy(
          cache: "\(directory)/cache",
          ["--private-cache", "--origin-header", "Authorization: Bearer \(secret)"])
        defer { proxy.kill() }
        let path = "/http/127.0.0.1:\(origin.port)/normal/mine?size=\(size)&auth=\(secret)"
        let first = try await blocking { try rawRequest(port: port, path) }
        #expect(first.status == 200 && Array(first.body) == TestOrigin.bytes(name: "mine", size: size))
        let before = origin.requests(for: "mine").count
        #expect(try await blocking { try rawRequest(port: port, path) }.body == first.body)
        #expect(origin.requests(for: "mine").count == before)
      }
    }
  }

  /// The hook is called for each origin request, so a token can change between them.
  @Test func theLibrarysHookIsAskedForEachRequest() async throws {
    let calls = Atomic<Int>(0)
    var configuration = OriginClient.Configuration()
    configuration.headers = { _ in
      let call = calls.add(1, ordering: .relaxed).newValue
      return [try! OriginHeader(name: "X-Token", value: "t\(call)")]
    }
    try await withReader(
      chunkSize: 65536, client: OriginClient(configuration: configuration), configuration: .init()
    ) { reader, origin, _ in
      let url = origin.url(.normal, "hooked", size: size)
      for range in [0..<Int64(100_000), 200_000..<Int64(size)] {
        let bytes = try await reader.read(url, range: .bounded(range))
        defer { bytes.close() }
        var count = 0
        for try await piece in bytes { count += piece.count }
        #expect(count == range.count)
      }
      let tokens = Set(origin.requests(for: "hooked").compactMap { $0.headers["x-token"] })
      #expect(tokens.count >= 2, "\(tokens)")
    }
  }

  /// Bad fields stop the command at start with the reason, never echoing the value.
  @Test(arguments: [
    ("Range: bytes=0-", "the cache sets this field itself"),
    ("Authorization Bearer s3cret-token-4711", "expected 'Name: value'"),
    ("X-Token: a\u{1}s3cret-token-4711", "control character"),
    ("Bad Name: s3cret-token-4711", "not an HTTP field name"),
  ])
  func badHeadersAreRefused(field: String, reason: String) async throws {
    for command in ["fetch", "proxy"] {
      let arguments =
        command == "fetch"
        ? ["fetch", "--origin-header", field, "http://127.0.0.1:9/x"]
        : [
          "proxy", "--origin-header", field, "--port", "0",
        ]
      let result = try await run(binary("mediacache"), arguments)
      #expect(result.status == 64, "\(command): \(result.stderr)")
      #expect(result.stderr.contains(reason), "\(command): \(result.stderr)")
      #expect(!result.stderr.contains(secret) && !result.text.contains(secret))
    }
  }
}
