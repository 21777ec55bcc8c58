import HTTPTypes
import MediaCacheHTTP

extension HTTPField.Name {
  /// `Cache-Status` (RFC 9211).
  static let cacheStatus = Self("Cache-Status")!
}

/// How a response used the cache, as its `Cache-Status` field (RFC 9211) says it: every byte of the range was
/// cached when the request came (`hit`), none was (`fwd=miss`), or some were (`fwd=partial`).
enum CacheUse: Equatable {
  case hit
  case miss
  case partial

  /// The use of a read of `count` bytes (nil: up to an end not known yet) of which `cachedAtOpen` were
  /// cached when it opened.
  init(cachedAtOpen: Int64, count: Int64?) {
    if cachedAtOpen <= 0 {
      self = count == 0 ? .hit : .miss
    } else if let count, cachedAtOpen >= count {
      self = .hit
    } else {
      self = .partial
    }
  }
}

extension ProxyResponder {
  /// The `Cache-Status` value of a response: the proxy's name (`ProxyServer.Configuration.cacheStatusName`),
  /// then `hit`, or `fwd=miss`/`fwd=partial` and `stored`: what the origin sends is stored (a HEAD's too: the
  /// length and validators, and the bytes its origin request brought before it was closed). Stale bytes that
  /// were revalidated say `fwd=stale` (with `fwd-status=304` when the origin confirmed them); stale bytes served
  /// because the origin failed say `hit` with their (negative) `ttl`, the freshness left in seconds, and
  /// `detail=stale-after-error`.
  func cacheStatus(
    _ use: CacheUse, _ revalidation: Revalidation = .notNeeded, _ freshness: ObjectFreshness? = nil
  ) -> String {
    if use == .hit, revalidation == .notNeeded { return server.hitCacheStatus }
    var parts = [server.configuration.cacheStatusName]
    switch (revalidation, use) {
    case (.notModified, _): parts += ["fwd=stale", "fwd-status=304"] + (use == .hit ? [] : ["stored"])
    case (.unchanged, _): parts += ["fwd=stale"] + (use == .hit ? [] : ["stored"])
    case (.replaced, _): parts += ["fwd=stale", "stored"]
    case (_, .hit): parts.append("hit")
    case (_, .miss): parts += ["fwd=miss", "stored"]
    case (_, .partial): parts += ["fwd=partial", "stored"]
    }
    if revalidation == .staleAfterError {
      if let freshness { parts.append("ttl=\(freshness.remaining)") }
      parts.append("detail=stale-after-error")
    }
    return parts.joined(separator: "; ")
  }
}

extension ProxyServer.Configuration {
  /// Whether `name` can stand in `Cache-Status` as it is: a structured-field token (RFC 8941 §3.3.4), a letter
  /// or `*` then letters, digits and `!#$%&'*+-.^_`|~:/`, at most 64 characters.
  public static func isValidCacheStatusName(_ name: String) -> Bool {
    let tokenCharacters = Set("!#$%&'*+-.^_`|~:/".utf8)
    guard let first = name.utf8.first, name.utf8.count <= 64,
      (first >= 0x41 && first <= 0x5A) || (first >= 0x61 && first <= 0x7A) || first == UInt8(ascii: "*")
    else { return false }
    return name.utf8.allSatisfy { byte in
      (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
        || tokenCharacters.contains(byte)
    }
  }
}

/// A `ProxyServer.Configuration` value the server cannot run with: `field` names it, `reason` says why.
public struct ProxyConfigurationError: Error, CustomStringConvertible {
  /// The configuration property, such as `cacheStatusName`.
  public var field: String
  /// Why the value cannot be used.
  public var reason: String
  /// `proxy configuration: FIELD: REASON`.
  public var description: String { "proxy configuration: \(field): \(reason)" }
}
