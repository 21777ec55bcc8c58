import Foundation
import MediaCacheProxy
import MediaCacheTestSupport
import Testing

/// HTTPS origins for real: nginx with certificates made by `openssl` (`TLSOrigin`), `mediacache fetch` and
/// `mediacache proxy` as built. Trust comes from `--ca-file`, `SSL_CERT_FILE` or `SSL_CERT_DIR`; every failed
/// handshake ends in one readable line within seconds, never a BoringSSL dump after retries.
@Suite(.serialized) struct TLSTests {
  static let mediacache = binary("mediacache")
  static let file = "hls/v0/seg000.ts"

  /// How a test trusts the test CA.
  enum Trust: String, CaseIterable, Sendable {
    case caFile, sslCertFile, sslCertDir

    func arguments(_ origin: TLSOrigin) -> [String] { self == .caFile ? ["--ca-file", origin.caFile] : [] }

    /// The environment of the command: this process's, plus the variable this case uses. `SSL_CERT_DIR` is
    /// given as a list whose first directory holds no certificate file, to show the list is read.
    func environment(_ origin: TLSOrigin) throws -> [String: String] {
      var environment = ProcessInfo.processInfo.environment
      environment["SSL_CERT_FILE"] = nil
      environment["SSL_CERT_DIR"] = nil
      switch self {
      case .caFile: break
      case .sslCertFile: environment["SSL_CERT_FILE"] = origin.caFile
      case .sslCertDir:
        let empty = origin.directory.file("dir-empty")
        let certs = origin.directory.file("dir-certs")
        for directory in [empty, certs] {
          try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        try "not a certificate\n".write(toFile: "\(empty)/README", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: origin.caFile, toPath: "\(certs)/test-ca.pem")
        environment["SSL_CERT_DIR"] = "\(empty):\(certs)"
      }
      return environment
    }
  }

  /// A plain environment: no SSL_CERT_* of the machine running the tests.
  static var cleanEnvironment: [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["SSL_CERT_FILE"] = nil
    environment["SSL_CERT_DIR"] = nil
    return environment
  }

  /// One line on standard error, naming the failure readably: no BoringSSL codes or source paths.
  static func expectReadable(
    _ stderr: String, contains expected: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    let lines = stderr.split(separator: "\n")
    #expect(lines.count == 1, "\(stderr)", sourceLocation: sourceLocation)
    #expect(stderr.contains(expected), "\(stderr)", sourceLocation: sourceLocation)
    for noise in ["BoringSSL", "error:", ".cc", "OPENSSL", "attempts)"] {
      #expect(!stderr.contains(noise), "\(noise) in: \(stderr)", sourceLocation: sourceLocation)
    }
  }

  @Test(arguments: Trust.allCases) func fetchSucceedsWithTheCATrusted(_ trust: Trust) async throws {
    try await withTLSOrigin { origin in
      let cache = origin.directory.file("cache")
      let url = origin.url(Self.file, port: origin.trustedPort)
      let result = try await run(
        Self.mediacache, ["fetch", "--cache", cache, url] + trust.arguments(origin),
        environment: try trust.environment(origin))
      #expect(result.status == 0, "\(trust): \(result.stderr)")
      let cat = try await run(Self.mediacache, ["cat", "--cache", cache, url])
      #expect([UInt8](cat.stdout) == (try mediaFixture(Self.file)), "\(trust): cached bytes differ")
    }
  }

  /// An HLS playlist set and a DASH presentation over HTTPS, the CA trusted by `--ca-file` or `SSL_CERT_FILE`.
  @Test(
    arguments: [["--hls", "hls/master.m3u8"], ["--dash", "dash/manifest.mpd"]],
    [Trust.caFile, Trust.sslCertFile])
  func fetchAManifestSetWithTheCATrusted(_ arguments: [String], _ trust: Trust) async throws {
    try await withTLSOrigin { origin in
      let cache = origin.directory.file("cache")
      let url = origin.url(arguments[1], port: origin.trustedPort)
      let result = try await run(
        Self.mediacache, ["fetch", arguments[0], "--cache", cache, url] + trust.arguments(origin),
        environment: try trust.environment(origin))
      #expect(result.status == 0, "\(trust) \(arguments): \(result.stderr)")
      #expect(result.text.contains("cached \(arguments[0] == "--hls" ? "HLS" : "DASH")"), "\(result.text)")
    }
  }

  /// Without the CA, with a self-signed certificate, and with a certificate for another name: exit 1 after
  /// one attempt, well within the 10 s connect timeout, with one line saying which.
  @Test func untrustedAndMismatchedCertificatesFailFastAndReadably() async throws {
    try await withTLSOrigin { origin in
      let cache = origin.directory.file("cache")
      let cases: [(port: Int, arguments: [String], expected: String)] = [
        (
          origin.trustedPort, [],
          "TLS: certificate for 127.0.0.1 is not trusted (issued by 'MediaCache Test CA', which is not a trusted CA)"
        ),
        (origin.selfSignedPort, [], "TLS: certificate for 127.0.0.1 is not trusted (self-signed)"),
        (
          origin.selfSignedPort, ["--ca-file", origin.caFile],
          "TLS: certificate for 127.0.0.1 is not trusted (self-signed)"
        ),
        (
          origin.wrongNamePort, ["--ca-file", origin.caFile],
          "TLS: certificate is for localhost, not 127.0.0.1"
        ),
      ]
      for (port, arguments, expected) in cases {
        let url = origin.url(Self.file, port: port)
        let started = Date()
        let result = try await run(
          Self.mediacache, ["fetch", "--cache", cache, url] + arguments, environment: Self.cleanEnvironment)
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == 1, "\(url): \(result.stderr)")
        #expect(elapsed < 5, "\(url): took \(elapsed) s")
        Self.expectReadable(result.stderr, contains: "mediacache: \(url): \(expected)")
      }
    }
  }

  /// A plain-HTTP client speaking TLS to nothing TLS: a handshake failure with BoringSSL's reason in words.
  @Test func aHandshakeFailureIsOneLine() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    try await withFileOrigin { origin in
      // The test origin speaks plain HTTP on its port: ask it for https.
      let url = origin.url(file: Self.file).replacingOccurrences(of: "http://", with: "https://")
      let started = Date()
      let result = try await run(
        Self.mediacache, ["fetch", "--cache", directory.file("cache"), url],
        environment: Self.cleanEnvironment)
      #expect(result.status == 1, "\(result.stderr)")
      #expect(Date().timeIntervalSince(started) < 5)
      Self.expectReadable(result.stderr, contains: "\(url): TLS: handshake failed (")
    }
  }

  /// The proxy trusts the CA given either way; an untrusted origin is a prompt 502 whose body is the reason.
  @Test(arguments: [Trust.caFile, Trust.sslCertFile]) func proxyServesWithTheCATrusted(_ trust: Trust)
    async throws
  {
    try await withTLSOrigin { origin in
      let environment = try trust.environment(origin)
      let (proxy, port) = try await startProxy(
        cache: origin.directory.file("cache"), trust.arguments(origin) + ["--retries", "3"],
        environment: environment)
      let goodPath = ProxyServer.proxyPath(for: origin.url(Self.file, port: origin.trustedPort))
      let good = try await blocking { try rawRequest(port: port, goodPath) }
      #expect(good.status == 200)
      #expect(good.body == (try mediaFixture(Self.file)), "\(trust): body differs")

      for (originPort, expected) in [
        (origin.selfSignedPort, "TLS: certificate for 127.0.0.1 is not trusted (self-signed)"),
        (origin.wrongNamePort, "TLS: certificate is for localhost, not 127.0.0.1"),
      ] {
        let url = origin.url(Self.file, port: originPort)
        let started = Date()
        let bad = try await blocking { try rawRequest(port: port, ProxyServer.proxyPath(for: url)) }
        let elapsed = Date().timeIntervalSince(started)
        let body = String(decoding: bad.body, as: UTF8.self)
        #expect(bad.status == 502, "\(body)")
        #expect(body.contains(expected), "\(body)")
        #expect(!body.contains("BoringSSL") && !body.contains(".cc"), "\(body)")
        #expect(elapsed < 5, "took \(elapsed) s")
      }
      let exit = try await blocking {
        proxy.kill(SIGTERM)
        return proxy.waitOnThisThread(timeout: 15)
      }
      #expect(exit.status == 0, "proxy exit: \(exit.stderr)")
    }
  }

  /// A CA file or directory that cannot be used stops the command at start, naming it.
  @Test func badTrustRootsAreAClearErrorAtStart() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let notPEM = directory.file("not.pem")
    try "hello\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
    let broken = directory.file("broken.pem")
    try "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
      .write(toFile: broken, atomically: true, encoding: .utf8)
    let missing = directory.file("missing.pem")
    let url = "https://127.0.0.1:1/x.mp4"
    let cases: [(arguments: [String], environment: [String: String], expected: String)] = [
      (["--ca-file", missing], [:], "mediacache: CA file \(missing): no such file"),
      (["--ca-file", notPEM], [:], "mediacache: CA file \(notPEM): holds no certificate"),
      (
        ["--ca-file", broken], [:],
        "mediacache: CA file \(broken): holds a PEM certificate that cannot be parsed"
      ),
      (["--ca-file", directory.path], [:], "mediacache: CA file \(directory.path): is a directory"),
      ([], ["SSL_CERT_FILE": missing], "mediacache: SSL_CERT_FILE \(missing): no such file"),
      (
        [], ["SSL_CERT_DIR": "\(directory.path)/nowhere"],
        "mediacache: SSL_CERT_DIR \(directory.path)/nowhere: no such directory"
      ),
    ]
    for (arguments, extra, expected) in cases {
      let environment = Self.cleanEnvironment.merging(extra) { $1 }
      for command in [["fetch", url], ["proxy", "--port", "0"]] {
        let result = try await run(
          Self.mediacache, command + ["--cache", directory.file("cache")] + arguments,
          environment: environment)
        #expect(result.status == 1, "\(command) \(arguments) \(extra): \(result.stderr)")
        Self.expectReadable(result.stderr, contains: expected)
      }
    }
    #expect(
      !FileManager.default.fileExists(atPath: directory.file("cache")), "no cache made before the check")
  }
}
