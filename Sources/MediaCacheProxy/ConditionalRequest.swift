import HTTPTypes
import MediaCache
import MediaCacheHTTP

/// A client's preconditions on a GET or HEAD, evaluated against the representation the cache would send, in the
/// order of RFC 9110 §13.2.2: `If-Match` and `If-Unmodified-Since` (§13.1.1, §13.1.4), whether the client's
/// copy is still the one it asks for, else `412 Precondition Failed`, as nginx evaluates them on a cached
/// response; then `If-None-Match` and `If-Modified-Since` (§13.1.2, §13.1.3), whether the copy the client holds
/// is the one the cache would send, so it is answered `304 Not Modified` without a body.
enum ConditionalRequest {
  /// Whether the request carries a condition this evaluates (the immediate path leaves such requests to it).
  static func isConditional(_ headers: HTTPFields) -> Bool {
    headers[.ifNoneMatch] != nil || headers[.ifModifiedSince] != nil || headers[.ifMatch] != nil
      || headers[.ifUnmodifiedSince] != nil
  }

  /// Whether a precondition fails for the selected representation, with validators `etag` and `lastModified`:
  /// `If-Match` when no member matches the entity tag by strong comparison (`*` matches any representation;
  /// a weak or missing tag matches nothing); without `If-Match`, `If-Unmodified-Since` when the representation
  /// was modified after that date (a date that does not parse, or a representation without `Last-Modified`,
  /// leaves the field ignored, §13.1.4).
  static func preconditionFails(_ headers: HTTPFields, etag: String?, lastModified: String?) -> Bool {
    if let ifMatch = headers[.ifMatch] {
      let members = ifMatch.split(separator: ",").map { String($0).trimmingSpaces() }
      if members.contains("*") { return false }
      guard let etag, !etag.hasPrefix("W/") else { return true }
      return !members.contains(etag)
    }
    guard let ifUnmodifiedSince = headers[.ifUnmodifiedSince], let since = HTTPDate.parse(ifUnmodifiedSince),
      let lastModified, let modified = HTTPDate.parse(lastModified)
    else { return false }
    return modified > since
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
