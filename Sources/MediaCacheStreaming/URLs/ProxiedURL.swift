import Foundation

/// The proxy's URLs for origin URLs, and back: the path form where a URL has one (`ProxyPathForm`), else the
/// query form `/<name>?url=<percent-encoded URL>`.
///
/// Strings only, no server: the proxy gives `path(for:)` to the playlist and MPD rewriters as the mapping of
/// their references (`ProxyServer.proxyPath(for:)` is this), and the fuzzers give it to them as the proxy does,
/// without the proxy's server stack.
public enum ProxiedURL {
  /// The proxied form of `originURL` relative to the proxy's root. The path form
  /// `/<scheme>/<host[:port]>/<path>[?query]` (see `ProxyPathForm`), so references relative to it resolve to
  /// proxied URLs; for a URL that has none (not http or https, userinfo, a character a request target cannot
  /// hold), the query form of `queryFormPath(for:)`.
  public static func path(for originURL: String) -> String {
    ProxyPathForm.path(for: originURL) ?? queryFormPath(for: originURL)
  }

  /// The query form of `originURL`: `/<name>?url=<percent-encoded URL>`, where the name is the URL's last path
  /// component (so players can tell the type by its extension). Relative references do not resolve through
  /// it; the proxy keeps accepting it.
  public static func queryFormPath(for originURL: String) -> String {
    "/\(displayName(for: originURL))?url=\(percentEncode(originURL))"
  }

  /// The origin URL a request for `target` (a request target as a player sends it: path and query) asks the
  /// proxy for: the origin URL of a path-form target (nil if the proxy would refuse to map it back), else its
  /// `url` query parameter, decoded exactly as the proxy decodes it (`RequestTarget`); nil without one.
  public static func originURL(inRequestTarget target: String) -> String? {
    let target = RequestTarget(target)
    if ProxyPathForm.isPathForm(target.path) {
      return try? ProxyPathForm.originURL(path: target.path, query: target.query)
    }
    return target.queryValue("url")
  }

  /// The URL's last path component if it is a plain file name, else `media`.
  static func displayName(for originURL: String) -> String {
    let path = URL(string: originURL)?.path ?? ""
    let last = path.split(separator: "/").last.map(String.init) ?? ""
    let plain =
      !last.isEmpty && last.count <= 128 && last != "." && last != ".."
      && last.unicodeScalars.allSatisfy {
        $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0))
      }
    return plain ? last : "media"
  }

  /// Percent-encodes everything but RFC 3986's unreserved characters.
  static func percentEncode(_ text: String) -> String {
    var unreserved = CharacterSet()
    unreserved.insert(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
  }
}
