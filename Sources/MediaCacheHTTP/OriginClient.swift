import AsyncHTTPClient
import Foundation
import MediaCache
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization
import SystemPackage

/// What the origin said about an object in one response.
public struct OriginMetadata: Sendable, Equatable {
  /// Total length, if the origin told it.
  public var length: Int64?
  /// The entity tag (`ETag`), verbatim.
  public var etag: String?
  /// The `Last-Modified` header value, verbatim.
  public var lastModified: String?
  /// The `Content-Type` header value.
  public var contentType: String?
  /// The response's end-to-end header fields but those above, and when it arrived (`OriginClient.storedFields`
  /// says which are kept).
  public var headers: StoredHeaders?
}

/// What a response head says, checked against the request.
struct ResponseHead: Sendable {
  var start: Int64
  var expectedBodyLength: Int64?
  var isPartial: Bool
  var metadata: OriginMetadata
}

/// One origin response, body not yet read.
struct OriginResponse: Sendable {
  /// First byte of the object the body holds (0 for a 200).
  var start: Int64
  /// Bytes the body should hold, when known (Content-Length or the Content-Range span).
  var expectedBodyLength: Int64?
  /// Whether this is a 206 for the range asked.
  var isPartial: Bool
  var metadata: OriginMetadata
  var body: HTTPClientResponse.Body
}

/// Range GETs against the origin through AsyncHTTPClient: `identity` encoding, bounded redirects, connect and
/// idle timeouts, and strict checking of what comes back. HTTPS origins are verified against the system's trust
/// roots plus `caFiles`, `SSL_CERT_FILE` and `SSL_CERT_DIR`; a failed handshake is one `OriginError.tlsFailed`
/// line, not retried.
public final class OriginClient: Sendable {
  /// Settings of the HTTP client.
  public struct Configuration: Sendable {
    /// Connect timeout, seconds.
    public var connectTimeout: Duration = .seconds(10)
    /// Longest silence while reading a response, seconds.
    public var idleTimeout: Duration = .seconds(30)
    /// Longest wait for a complete response head after the request went out, seconds: an origin that trickles
    /// headers (each byte within the idle timeout) is given up on after this.
    public var headTimeout: Duration = .seconds(30)
    /// Redirects followed at most.
    public var maxRedirects = 5
    /// The hosts a redirect may lead to (lower-case names or addresses; nil, the default: any). A redirect to
    /// another host fails the request with `OriginError.redirectNotAllowed` before it is followed: a proxy
    /// that fetches only from some hosts (`ProxyServer.Configuration.allowedHosts`, `--allow-host`) sets the
    /// same hosts here, so that an origin's redirect cannot take it elsewhere.
    public var allowedRedirectHosts: Set<String>?
    /// `User-Agent` sent.
    public var userAgent = "MediaCache/1"
    /// PEM files (bundles) of certificates trusted for HTTPS origins in addition to the system's roots: a
    /// private CA, or a self-signed origin's own certificate.
    public var caFiles: [FilePath] = []
    /// Whether `SSL_CERT_FILE` (a PEM bundle) and `SSL_CERT_DIR` (colon-separated directories of PEM files) of
    /// the process environment add trust roots too, as they do for curl and OpenSSL.
    public var readsSSLEnvironment = true
    /// Header fields added to every request for a URL: credentials (a bearer token, a cookie, a signed
    /// header). Called for each origin request, so a token can be refreshed. Never logged or stored.
    public var headers: @Sendable (String) -> [OriginHeader] = { _ in [] }
    /// Whether the cache is shared by several users (the proxy) rather than private to one (an app): a shared
    /// cache stores the response to a request with credentials (`Authorization`, `Cookie`) only if the
    /// response says `public`, `s-maxage` or `must-revalidate` (RFC 9111 3.5); other such responses fail with
    /// `OriginError.notStorable`. Default false: an app's cache stores what its own credentials fetch.
    public var isSharedCache = false
    /// How `Cache-Control` and `Expires` are applied: what may be stored and how long it stays fresh.
    public var freshness = FreshnessPolicy()

    /// A configuration with the given timeouts (seconds), redirect limit and extra trust roots (PEM files).
    public init(
      connectTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(30),
      headTimeout: Duration = .seconds(30), maxRedirects: Int = 5,
      caFiles: [FilePath] = [], readsSSLEnvironment: Bool = true
    ) {
      self.connectTimeout = connectTimeout
      self.idleTimeout = idleTimeout
      self.headTimeout = headTimeout
      self.maxRedirects = maxRedirects
      self.caFiles = caFiles
      self.readsSSLEnvironment = readsSSLEnvironment
    }
  }

  let http: HTTPClient
  /// With `Configuration.allowedRedirectHosts`: those hosts, lower-cased, and a client that follows no
  /// redirect, for the requests whose redirects are followed here, each hop checked first
  /// (`execute(_:url:)`; the cache's own fetches are checked in their delegate, `BodyWriter.didVisitURL`).
  let redirects: (hosts: Set<String>, client: HTTPClient)?
  /// Timeouts, redirects and trust roots of this client.
  public let configuration: Configuration
  /// Why the trust roots could not be loaded, for a client made with `init(configuration:)`: every request
  /// then fails with it.
  let trustFailure: OriginError?

  /// A client; a trust root that cannot be loaded fails every request with `OriginError.invalidTrustRoots`
  /// (use `init(checking:)` to be told at once).
  public convenience init(configuration: Configuration = Configuration()) {
    do {
      try self.init(checking: configuration)
    } catch {
      self.init(configuration: configuration, extraRoots: [], trustFailure: error)
    }
  }

  /// A client, or `OriginError.invalidTrustRoots` naming the CA file or directory that cannot be used.
  public convenience init(checking configuration: Configuration) throws(OriginError) {
    let roots = try OriginTrust.load(
      caFiles: configuration.caFiles,
      environment: configuration.readsSSLEnvironment ? ProcessInfo.processInfo.environment : [:])
    self.init(configuration: configuration, extraRoots: roots, trustFailure: nil)
  }

  private init(configuration: Configuration, extraRoots: [NIOSSLCertificate], trustFailure: OriginError?) {
    self.configuration = configuration
    self.trustFailure = trustFailure
    var settings = HTTPClient.Configuration(
      redirectConfiguration: .follow(max: configuration.maxRedirects, allowCycles: false),
      timeout: .init(
        connect: TimeAmount(configuration.connectTimeout), read: TimeAmount(configuration.idleTimeout)),
      decompression: .disabled)
    settings.httpVersion = .http1Only
    if !extraRoots.isEmpty {
      var tls = TLSConfiguration.makeClientConfiguration()
      tls.additionalTrustRoots = [.certificates(extraRoots)]
      settings.tlsConfiguration = tls
    }
    // A failed connection attempt fails the request at once, with its cause. AsyncHTTPClient would otherwise
    // retry it silently until the connect timeout and then report the last error: an untrusted certificate
    // took the whole timeout per attempt, and retrying cannot fix it. The reader retries connection errors
    // itself, with backoff (CachingReader.Configuration.maxRetries), and TLS failures not at all.
    settings.connectionPool.retryConnectionEstablishment = false
    // AsyncHTTPClient queues a request once a host has this many HTTP/1 connections (default 8): it would be a
    // hidden limiter behind the request scheduler, making the ninth player wait. Request counts are limited by
    // `RequestScheduler` alone (CachingReader's foreground cap and background per-host limit).
    settings.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = RequestScheduler.connectionPoolLimit
    http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
    redirects = configuration.allowedRedirectHosts.map { hosts in
      settings.redirectConfiguration = .disallow
      return (
        Set(hosts.map { $0.lowercased() }),
        HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
      )
    }
  }

  private let isShutDown = Atomic<Bool>(false)

  /// Closes the client's connections.
  public func shutdown() async throws {
    guard !isShutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
    try await http.shutdown()
    try await redirects?.client.shutdown()
  }

  deinit {
    // A client dropped without `shutdown()` still closes its connections (AsyncHTTPClient traps otherwise).
    if !isShutDown.load(ordering: .acquiring) {
      let (http, other) = (self.http, redirects?.client)
      Task {
        try? await http.shutdown()
        try? await other?.shutdown()
      }
    }
  }

  /// Checks that `url` is an absolute http or https URL.
  static func validate(_ url: String) throws(OriginError) {
    guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
      throw .invalidURL(url)
    }
    guard scheme == "http" || scheme == "https" else { throw .unsupportedScheme(url: url) }
    guard components.host?.isEmpty == false else { throw .invalidURL(url) }
  }

  /// What the origin says about the object, from a GET of its first byte (not HEAD: URLs signed for GET, and
  /// origins that refuse HEAD, answer a one-byte range like any other). The body is not read.
  func probe(_ url: String) async throws -> OriginMetadata {
    let started = ContinuousClock.now
    do {
      let metadata = try await get(url, start: 0, end: 1, ifRange: nil).metadata
      ReaderMetrics.noteRequest(duration: .now - started, error: nil)
      return metadata
    } catch {
      ReaderMetrics.noteRequest(duration: .now - started, error: error)
      throw error
    }
  }

  /// GET of bytes `start..<end` (`end` nil: to the end of the object), with `If-Range` when a validator is
  /// given. Checks status, `Content-Range` and `Content-Encoding`; the body is returned unread.
  func get(_ url: String, start: Int64, end: Int64?, ifRange: String?) async throws -> OriginResponse {
    if let trustFailure { throw trustFailure }
    var request = HTTPClientRequest(url: url)
    let fields = requestHeaders(for: url, start: start, end: end, ifRange: ifRange)
    for (name, value) in fields.headers { request.headers.add(name: name, value: value) }
    let response = try await execute(request, url: url)
    let head = try Self.interpret(
      status: response.status, headers: response.headers, url: url, start: start, end: end,
      sharedWithCredentials: fields.sharedWithCredentials, forwarded: fields.forwarded,
      freshness: configuration.freshness,
      sharedCache: configuration.isSharedCache)
    return OriginResponse(
      start: head.start, expectedBodyLength: head.expectedBodyLength, isPartial: head.isPartial,
      metadata: head.metadata, body: response.body)
  }

  /// The headers of a range GET of `url` (the configured `headers` after the cache's own), and whether its
  /// response must allow a shared cache to store it (`Configuration.isSharedCache` and credentials sent).
  func requestHeaders(for url: String, start: Int64, end: Int64?, ifRange: String?) -> (
    headers: [(String, String)], sharedWithCredentials: Bool, forwarded: Set<String>
  ) {
    var headers: [(String, String)] = []
    if start > 0 || end != nil { headers.append(("Range", "bytes=\(Self.rangeText(start, end))")) }
    if let ifRange { headers.append(("If-Range", ifRange)) }
    headers.append(("Accept-Encoding", "identity"))
    Self.requestCounter?.increment()  // one request is being made
    let forwarded = Self.forwardedHeaders
    let names = Set(forwarded.map { $0.name.lowercased() })
    let added = configuration.headers(url).filter { !names.contains($0.name.lowercased()) } + forwarded
    if !added.contains(where: { $0.name.lowercased() == "user-agent" }) {
      headers.append(("User-Agent", configuration.userAgent))
    }
    headers += added.map { ($0.name, $0.value) }
    return (headers, configuration.isSharedCache && added.contains(where: \.isCredential), names)
  }

  static func rangeText(_ start: Int64, _ end: Int64?) -> String {
    "\(start)-\(end.map { String($0 - 1) } ?? "")"
  }

  /// Maps AsyncHTTPClient's and SwiftNIO's errors to `OriginError` (cancellation passes through).
  static func map(_ error: any Error, url: String) -> any Error {
    if let failure = TLSFailure(error) {
      return OriginError.tlsFailed(url: url, reason: failure.reason(host: host(of: url), chain: nil))
    }
    switch error {
    case let error as HTTPClientError:
      if error == .redirectLimitReached || error == .redirectCycleDetected {
        return OriginError.tooManyRedirects(url: url)
      }
      if error == .cancelled { return CancellationError() }
      if error == .connectTimeout || error == .readTimeout || error == .deadlineExceeded
        || error == .writeTimeout
      {
        return OriginError.timedOut(url: url, reason: "\(error)", attempts: 1)
      }
      return OriginError.connectionFailed(url: url, reason: "\(error)", attempts: 1)
    case let error as HTTPParserError:
      // Not valid HTTP, or a head past NIO's limits (80 KiB, or 65 534 fields): the same origin would answer
      // the same way again.
      let reason =
        error == .headerOverflow
        ? "response head larger than \(maxResponseHeadBytes / 1024) KiB" : "invalid HTTP (\(error))"
      return OriginError.malformedResponse(url: url, reason: reason)
    case let error as BoringSSLError:
      // After the handshake (a bad record): retried like any lost connection, described without BoringSSL's
      // codes and source paths.
      let reason = "TLS error (\(TLSFailure.reasons(error).joined(separator: "; ")))"
      return OriginError.connectionFailed(url: url, reason: reason, attempts: 1)
    case ChannelError.connectTimeout:
      return OriginError.timedOut(url: url, reason: "\(error)", attempts: 1)
    case let error as IOError:
      // NIO's own text for a refused connect is "connection reset (error set): Connection refused) (errno:
      // 111)": the system's words for the errno say it.
      let reason = "\(Errno(rawValue: error.errnoCode)) (errno \(error.errnoCode))"
      return OriginError.connectionFailed(url: url, reason: reason, attempts: 1)
    case is CancellationError, is OriginError, is StoreError: return error
    default: return OriginError.connectionFailed(url: url, reason: "\(error)", attempts: 1)
    }
  }

  /// The response head size NIO's decoder accepts (its default, which AsyncHTTPClient uses): a longer head
  /// fails with `HTTPParserError.headerOverflow`, so an origin sending headers forever costs at most this.
  static let maxResponseHeadBytes = NIOHTTPDecoderLimitConfiguration().maxHeaderListSize

  /// The deadline of a response head sent now.
  var headDeadline: NIODeadline { .now() + TimeAmount(configuration.headTimeout) }

  func execute(_ request: HTTPClientRequest, url: String) async throws -> HTTPClientResponse {
    if let redirects { return try await executeCheckingRedirects(request, url: url, redirects) }
    return try await executeOnce(request, url: url, on: http)
  }

  /// One request on `client`, its errors mapped to `OriginError`.
  func executeOnce(_ request: HTTPClientRequest, url: String, on client: HTTPClient) async throws
    -> HTTPClientResponse
  {
    do {
      // The deadline covers the head only: `execute` returns once the head is in, and the body is read later.
      return try await client.execute(request, deadline: headDeadline)
    } catch let error as HTTPClientError where error == .deadlineExceeded {
      throw headTimedOut(url)
    } catch {
      throw await describe(error, url: url)
    }
  }

  /// `map(_:url:)`, and for a failed handshake about the certificate, why it failed, from the certificate the
  /// origin presents (one more connection, bounded by the connect timeout).
  package func describe(_ error: any Error, url: String) async -> any Error {
    if let failure = TLSFailure(error) { return await tlsFailed(failure, url: url) }
    return Self.map(error, url: url)
  }

  /// The error of a failed handshake, saying why from the certificates the origin presents (read on a second
  /// connection, bounded by the connect timeout) when the failure is about the certificate.
  func tlsFailed(_ failure: TLSFailure, url: String) async -> OriginError {
    let host = Self.host(of: url)
    var chain: [NIOSSLCertificate]?
    if failure == .untrusted || failure == .hostnameMismatch, let components = URLComponents(string: url) {
      let port = components.port ?? (components.scheme?.lowercased() == "http" ? 80 : 443)
      chain = await PeerCertificates.fetch(
        host: host, port: port, timeout: TimeAmount(configuration.connectTimeout))
    }
    return .tlsFailed(url: url, reason: failure.reason(host: host, chain: chain))
  }

  /// The host of `url` (an IPv6 literal without its brackets), or the URL itself if it has none.
  static func host(of url: String) -> String {
    guard var host = URLComponents(string: url)?.host, !host.isEmpty else { return url }
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    return host
  }

  /// The error of a response head not complete within `headTimeout`.
  func headTimedOut(_ url: String) -> OriginError {
    .timedOut(
      url: url, reason: "no complete response head within \(configuration.headTimeout.seconds) s", attempts: 1
    )
  }
}
