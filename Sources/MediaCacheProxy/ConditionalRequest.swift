import HTTPTypes
import MediaCache
import MediaCacheHTTP

/// A client's `If-None-Match` and `If-Modified-Since` on a GET or HEAD (RFC 9110 §13.1.2, §13.1.3, evaluated in
/// the order of §13.2.2): whether the copy the client holds is the one the cache would send, so it is answered
/// `304 Not Modified` without a body.
enum ConditionalRequest {
  /// Whether the request carries a condition this evaluates (the immediate path leaves such requests to it).
  static func isConditional(_ headers: HTTPFields) -> Bool {
    headers[.ifNoneMatch] != nil || headers[.ifModifiedSince] != nil
  }

  /// Whether the selected representation, with validators `etag` and `lastModified`, is "not modified" for
  /// the request. `If-None-Match` decides alone when present (weak comparison; `*` matches any current
  /// representation); otherwise `If-Modified-Since` holds when the representation has a `Last-Modified` not
  /// later than that date. A field that does not parse is ignored, as §13.1.3 asks of an invalid date.
  static func notModified(_ headers: HTTPFields, etag: String?, lastModified: String?) -> Bool {
    if let ifNoneMatch = headers[.ifNoneMatch] {
      let members = ifNoneMatch.split(separator: ",").map { String($0).trimmingSpaces() }
      if members.contains("*") { return true }
      guard let etag else { return false }
      let opaque = weakOpaque(etag[...])
      return members.contains { weakOpaque($0[...]) == opaque }
    }
    guard let ifModifiedSince = headers[.ifModifiedSince], let since = HTTPDate.parse(ifModifiedSince),
      let lastModified, let modified = HTTPDate.parse(lastModified)
    else { return false }
    return modified <= since
  }

  /// The opaque tag of an entity tag, without its weakness indicator (weak comparison, §8.8.3.2).
  private static func weakOpaque(_ tag: Substring) -> Substring {
    tag.hasPrefix("W/") ? tag.dropFirst(2) : tag
  }
}
