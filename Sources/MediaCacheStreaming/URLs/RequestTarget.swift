/// A request target as the proxy reads it (RFC 9112 §3.2): its path and its query, split at the first `?`,
/// neither percent-decoded.
///
/// The proxy's requests are parsed with it (`ProxyRequest`), and so is a target named outside a request
/// (`ProxiedURL.originURL(inRequestTarget:)`, the fuzzers), so both read a target the same way.
package struct RequestTarget: Sendable, Equatable {
  /// The path, before any `?`. For an absolute-form target (`http://127.0.0.1:8089/metrics`, as sent to a
  /// proxy), the path after its authority (`/` when it has none).
  package var path: Substring
  /// The query, after the first `?`; nil without one.
  package var query: Substring?

  /// A target of `path` and `query`, already split.
  package init(path: Substring, query: Substring?) {
    (self.path, self.query) = (path, query)
  }

  /// Splits `target` (as a request line gives it).
  package init(_ target: String) {
    var target = Substring(target)
    // An origin-form target (`/…`, every player's) is not searched (Foundation's `range(of:)`, used before,
    // went through CFString for every request).
    if target.utf8.first != UInt8(ascii: "/"), let scheme = target.firstRange(of: "://"),
      scheme.lowerBound > target.startIndex, target[..<scheme.lowerBound].allSatisfy(\.isLetter)
    {
      let authorityAndPath = target[scheme.upperBound...]
      target = authorityAndPath.firstIndex(of: "/").map { authorityAndPath[$0...] } ?? "/"
    }
    (path, query) = target.splitOnce(at: "?")
  }

  /// The first value of query parameter `name`, percent-decoded (kept as sent if it does not decode); nil
  /// when absent.
  package func queryValue(_ name: String) -> String? {
    guard let query else { return nil }
    for pair in query.split(separator: "&") {
      let key = pair.prefix { $0 != "=" }
      guard key == name else { continue }
      let value = pair[key.endIndex...].dropFirst()
      return value.percentDecoded ?? String(value)
    }
    return nil
  }
}
