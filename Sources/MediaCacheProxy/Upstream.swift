import Foundation
import MediaCacheStreaming

/// One mapping of the reverse-proxy mode: a request whose path is `prefix` or below it is served from `base`
/// followed by the rest of the path, with the query kept (`--upstream /videos=https://cdn.example.com/v`:
/// `GET /videos/a.mp4?t=1` reads `https://cdn.example.com/v/a.mp4?t=1`).
///
/// In this mode the proxy's own endpoints live under `ProxyServer.adminPrefix`, and the path form and `?url=`
/// are not interpreted: every other path belongs to an upstream.
public struct Upstream: Sendable, Equatable, CustomStringConvertible {
  /// The path prefix, without a trailing `/` (empty: every path).
  public let prefix: String
  /// The upstream URL the prefix stands for: `http` or `https`, a host, an optional path, without a trailing
  /// `/`, a query or a fragment.
  public let base: String
  /// Whether `base` has a path (else the bare prefix maps to `base/`).
  private let baseHasPath: Bool

  /// A mapping of `prefix` (an absolute path; `/` or empty: every path) to `base`; throws
  /// `ProxyConfigurationError` naming the value when either cannot be used.
  public init(prefix: String = "/", base: String) throws(ProxyConfigurationError) {
    func invalid(_ reason: String) -> ProxyConfigurationError {
      let shown = prefix == "/" ? base.prefix(200) : "\(prefix)=\(base.prefix(200))"
      return ProxyConfigurationError(field: "upstreams", reason: "'\(shown)': \(reason)")
    }
    var trimmedPrefix = Substring(prefix)
    while trimmedPrefix.hasSuffix("/") { trimmedPrefix = trimmedPrefix.dropLast() }
    guard prefix.isEmpty || prefix.hasPrefix("/") else { throw invalid("the prefix must start with /") }
    guard
      trimmedPrefix.utf8.allSatisfy({
        $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
      })
    else { throw invalid("the prefix must be a path without spaces, control characters, ? or #") }
    guard !trimmedPrefix.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else {
      throw invalid("the prefix has a . or .. segment")
    }
    if Self.isAdminPath(trimmedPrefix + "/") {
      throw invalid("the prefix is under \(ProxyServer.adminPrefix), where the proxy's own endpoints are")
    }
    guard let url = URL(string: base), let scheme = url.scheme?.lowercased(),
      scheme == "http" || scheme == "https"
    else { throw invalid("the upstream must be an absolute http or https URL") }
    guard let host = url.host, !host.isEmpty else { throw invalid("the upstream URL has no host") }
    guard url.query == nil, url.fragment == nil, !base.contains("?"), !base.contains("#") else {
      throw invalid("the upstream URL must not have a query or a fragment")
    }
    guard url.user == nil, url.password == nil else {
      throw invalid("the upstream URL must not hold credentials (use --origin-header)")
    }
    var trimmedBase = Substring(base)
    while trimmedBase.hasSuffix("/") { trimmedBase = trimmedBase.dropLast() }
    self.prefix = String(trimmedPrefix)
    self.base = String(trimmedBase)
    baseHasPath = !(URL(string: self.base)?.path.isEmpty ?? true)
  }

  /// A mapping from its command-line form: `URL` (every path) or `PREFIX=URL`.
  public init(argument: String) throws(ProxyConfigurationError) {
    if argument.hasPrefix("/"), let equals = argument.firstIndex(of: "=") {
      try self.init(
        prefix: String(argument[..<equals]), base: String(argument[argument.index(after: equals)...]))
    } else {
      try self.init(base: argument)
    }
  }

  /// `PREFIX=BASE` (`/` for the root).
  public var description: String { "\(shownPrefix)=\(base)" }

  /// The prefix as a person reads it: `/` for the root.
  public var shownPrefix: String { prefix.isEmpty ? "/" : prefix }

  /// Throws `ProxyConfigurationError` when two of `upstreams` have the same prefix (the server refuses to start
  /// with them).
  public static func checkDistinct(_ upstreams: [Upstream]) throws(ProxyConfigurationError) {
    var seen = Set<String>()
    for upstream in upstreams where !seen.insert(upstream.prefix).inserted {
      throw ProxyConfigurationError(
        field: "upstreams", reason: "two upstreams for the prefix '\(upstream.shownPrefix)'")
    }
  }

  /// Whether a request path belongs to this mapping: it is the prefix, or lies below it.
  func matches(_ path: Substring) -> Bool {
    guard path.hasPrefix(prefix) else { return false }
    let rest = path.dropFirst(prefix.count)
    return rest.isEmpty || rest.hasPrefix("/")
  }

  /// The upstream URL of a path this mapping `matches`, with the query.
  func url(path: Substring, query: Substring?) -> String {
    var rest = path.dropFirst(prefix.count)
    if rest.isEmpty, !baseHasPath { rest = "/" }
    return base + rest + (query.map { "?\($0)" } ?? "")
  }

  /// Whether `path` is one of the proxy's own (under `ProxyServer.adminPrefix`).
  static func isAdminPath(_ path: Substring) -> Bool {
    path == ProxyServer.adminPrefix.dropLast() || path.hasPrefix(ProxyServer.adminPrefix)
  }
}

extension ProxyServer {
  /// Where the proxy's own endpoints are in the reverse-proxy mode (`/.mediacache/metrics`,
  /// `/.mediacache/preload`, the dashboard at `/.mediacache/`), so that they shadow no upstream path.
  public static let adminPrefix = "/.mediacache/"
}

/// The reverse-proxy mode's mappings, the longest prefix first.
struct UpstreamMap: Sendable {
  let upstreams: [Upstream]

  /// The mappings, the longest prefix first (`Upstream.checkDistinct` them first).
  init(_ upstreams: [Upstream]) {
    self.upstreams = upstreams.sorted { $0.prefix.count > $1.prefix.count }
  }

  /// The upstream URL a request path and query stand for; throws the refusal for a path with a `.` or `..`
  /// segment (plain or percent-encoded: the upstream could resolve it above the mapped path), under no prefix,
  /// or under `ProxyServer.adminPrefix` (the proxy's own, never an upstream's).
  func url(path: Substring, query: Substring?) throws(Refusal) -> String {
    guard path.hasPrefix("/") else {
      throw Refusal(.badRequest, "the request target is not an absolute path")
    }
    guard !Upstream.isAdminPath(path) else {
      throw Refusal(.notFound, "\(ProxyServer.adminPrefix) is the proxy's own")
    }
    for segment in path.split(separator: "/", omittingEmptySubsequences: false) {
      let decoded = ProxyRequest.percentDecoded(segment) ?? String(segment)
      if decoded == "." || decoded == ".." {
        throw Refusal(.badRequest, "the path has a . or .. segment")
      }
    }
    guard let upstream = upstreams.first(where: { $0.matches(path) }) else {
      throw Refusal(.notFound, "no upstream serves this path")
    }
    return upstream.url(path: path, query: query)
  }

  /// The local path that `url` (an absolute URL) is served at, if it lies under an upstream's base; nil
  /// otherwise. The longest base wins.
  func localPath(for url: URL) -> String? {
    let text = url.absoluteString
    var best: Upstream?
    for upstream in upstreams
    where text.hasPrefix(upstream.base)
      && (text.count == upstream.base.count
        || "/?#".contains(text[text.index(text.startIndex, offsetBy: upstream.base.count)]))
    {
      if best.map({ upstream.base.count > $0.base.count }) ?? true { best = upstream }
    }
    guard let best else { return nil }
    var rest = text.dropFirst(best.base.count)
    if !rest.hasPrefix("/") { rest = "/" + rest }
    let local = best.prefix + rest
    return local.hasPrefix("//") || Upstream.isAdminPath(local[...]) ? nil : String(local)
  }
}
