import Foundation
import HTTPTypes
import MediaCache
import MediaCacheHTTP
import MediaCacheStreaming
import NIOCore

/// Routing: which of the proxy's own endpoints a request asks for, or which origin URL (path form, `?url=`, or
/// in the reverse-proxy mode an upstream's) and range.
extension ProxyResponder {
  /// The response of one of the proxy's own endpoints (metrics, preload, dashboard) if `request` asks for
  /// one, else nil.
  func ownEndpoint(_ request: ProxyRequest) async throws -> ProxyResponse? {
    if Self.isMetricsRequest(request) {
      guard request.method == .GET || request.method == .HEAD else { throw Refusal.methodNotAllowed }
      let text = await metrics.render()
      var headers = HTTPFields()
      headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
      headers[.contentLength] = "\(text.utf8.count)"
      let body: ProxyResponse.Body = request.method == .HEAD ? .empty : .bytes(ByteBuffer(string: text))
      return ProxyResponse(status: .ok, headers: headers, body: body)
    }
    if PreloadEndpoint.isPreloadRequest(request) { return try await preloadResponse(request) }
    if Dashboard.isDashboardRequest(request) {
      return try await Dashboard.response(to: request, server: server)
    }
    return nil
  }

  // MARK: Origin URL

  /// The origin URL of a request target the player would send (path and query): the upstream's in the
  /// reverse-proxy mode, else that of the path form or `?url=`; nil if the proxy would not map it.
  func originURL(ofTarget target: String) -> String? {
    guard let upstreams = server.upstreamMap else { return ProxyServer.originURL(inRequestTarget: target) }
    let (path, query) = Substring(target).splitOnce(at: "?")
    return try? upstreams.url(path: path, query: query)
  }

  /// Whether the request asks for one of the proxy's own endpoints (`ownEndpoint`) rather than a proxied URL.
  static func isOwnEndpoint(_ request: ProxyRequest) -> Bool {
    isMetricsRequest(request) || PreloadEndpoint.isPreloadRequest(request)
      || Dashboard.isDashboardRequest(request)
  }

  /// Whether the request asks for the proxy's metrics (`/metrics` without `?url=`).
  static func isMetricsRequest(_ request: ProxyRequest) -> Bool {
    request.path == "/metrics" && (ProxyPathForm.isPathForm(request.path) || request.queryValue("url") == nil)
  }

  /// What a GET or HEAD of a proxied URL asks for: the origin URL (checked), whether the request used the path
  /// form, its Range header (none for a HEAD: Range is defined for GET only, RFC 9110 §14.2) and the single
  /// range it names (else all). Throws the refusal for another method or a URL the proxy does not serve. The
  /// origin URL the event loop resolved (`ProxyRequest.resolvedTarget`) is taken as it is.
  func target(of request: ProxyRequest) throws -> (
    origin: String, isPathForm: Bool, rangeHeader: RangeHeader, requested: RequestedRange
  ) {
    guard request.method == .GET || request.method == .HEAD else { throw Refusal.methodNotAllowed }
    let rangeHeader = request.method == .HEAD ? RangeHeader(nil) : RangeHeader(request.headers[.range])
    let requested = rangeHeader.requested
    if let resolved = request.resolvedTarget {
      let isPathForm = server.upstreamMap == nil && ProxyPathForm.isPathForm(request.path)
      return (resolved.origin, isPathForm, rangeHeader, requested)
    }
    if let upstreams = server.upstreamMap {
      // The path form and `?url=` mean nothing here: the path is the upstream's.
      let origin = try checkedOriginURL(try upstreams.url(path: request.path, query: request.query))
      return (origin, false, rangeHeader, requested)
    }
    let isPathForm = ProxyPathForm.isPathForm(request.path)
    let urlParameter = isPathForm ? nil : request.queryValue("url")
    // A target like `/ftp/host/x` without `?url=` is a path form with a scheme the proxy does not serve.
    let looksLikePathForm = isPathForm || (urlParameter == nil && request.path.dropFirst().contains("/"))
    let origin = try checkedOriginURL(looksLikePathForm ? pathFormOrigin(request) : urlParameter)
    return (origin, isPathForm, rangeHeader, requested)
  }

  /// The origin URL of a path-form request, refused with 400 and the reason when it cannot be mapped back.
  func pathFormOrigin(_ request: ProxyRequest) throws -> String {
    do {
      return try ProxyPathForm.originURL(path: request.path, query: request.query)
    } catch {
      throw Refusal(.badRequest, error.description)
    }
  }

  /// The origin URL of `?url=` or of the path form, refused unless it is an absolute http(s) URL of an
  /// allowed host.
  func checkedOriginURL(_ value: String?) throws -> String {
    guard let value, !value.isEmpty else {
      throw Refusal(
        .badRequest,
        "missing ?url=<percent-encoded origin URL> (or use the path form /http/HOST/PATH, /https/HOST/PATH)")
    }
    guard value.utf8.count <= 8192 else {
      throw Refusal(.uriTooLong, "the origin URL is \(value.utf8.count) bytes long; at most 8192 are proxied")
    }
    guard let url = URL(string: value), let scheme = url.scheme?.lowercased() else {
      throw Refusal(.badRequest, "the origin URL is not a valid URL")
    }
    guard scheme == "http" || scheme == "https" else {
      throw Refusal(.forbidden, "only http and https origin URLs are proxied, not \(scheme):")
    }
    guard let host = url.host?.lowercased(), !host.isEmpty else {
      throw Refusal(.badRequest, "the origin URL has no host")
    }
    if let allowed = server.configuration.allowedHosts, !allowed.contains(host) {
      throw Refusal(.forbidden, "origin host \(host) is not in the proxy's allowed hosts")
    }
    return value
  }
}
