import Foundation
import NIOHTTP1

// What this cache may store (RFC 9111 3 and 3.5): one decision for the cache's own fetches
// (`OriginClient.interpret`), its revalidations (`OriginClient.revalidate`) and its relays
// (`OriginClient.forward`).

/// RFC 9111 3 and 3.5: why a cache under `policy`, `sharedCache` or not, may not store the response with
/// `headers` (nil: it may), to a request that sent credentials to a shared cache (`sharedWithCredentials`) and
/// the player's fields `forwarded` (lowercased names).
///
/// Credentials (RFC 9111 3.5, and `Cookie` likewise): the response must say `public`, `s-maxage` or
/// `must-revalidate`, even with `FreshnessPolicy.ignoresCacheControl`. Then `no-store`; `private` in a shared
/// cache; and `Vary` (RFC 9111 4.1): the cache's origin requests carry none of the player's fields but those it
/// forwards (`OriginClient.forwardedHeaders`), so every player gets the variant for a request without the others
/// whether the response is stored or relayed: only `Vary: *` and a field the cache forwards make a response one
/// it may not store.
func storageRefusal(
  _ headers: HTTPHeaders, policy: FreshnessPolicy, sharedCache: Bool, sharedWithCredentials: Bool,
  forwarded: Set<String>
) -> String? {
  let cacheControl = headers["Cache-Control"]
  if sharedWithCredentials, !SharedStorage.allowsCredentialedResponse(cacheControl) {
    return "the response to a request with credentials says neither Cache-Control public, s-maxage nor "
      + "must-revalidate, so a shared cache may not store it (RFC 9111 3.5); mark it public at the "
      + "origin, or run a private cache (--private-cache)"
  }
  guard !policy.ignoresCacheControl else { return nil }
  let directives = CacheDirectives(cacheControl)
  if directives.noStore { return "the origin's Cache-Control says no-store" }
  if sharedCache && directives.isPrivate {
    return
      "the origin's Cache-Control says private, and this cache is shared (run --private-cache to store it)"
  }
  let varying = headers["Vary"].flatMap { $0.split(separator: ",") }
    .map { $0.trimmingCharacters(in: .whitespaces) }
    .filter { $0 == "*" || forwarded.contains($0.lowercased()) }
  if !varying.isEmpty {
    return "the origin's response varies on \(varying.joined(separator: ", ")) (Vary), which this cache does "
      + "not store copies by"
  }
  return nil
}

extension OriginClient {
  /// `storageRefusal` under this client's configuration (its freshness policy, and whether it is shared).
  func storageRefusal(_ headers: HTTPHeaders, sharedWithCredentials: Bool, forwarded: Set<String>) -> String?
  {
    MediaCacheHTTP.storageRefusal(
      headers, policy: configuration.freshness, sharedCache: configuration.isSharedCache,
      sharedWithCredentials: sharedWithCredentials, forwarded: forwarded)
  }
}

/// RFC 9111 3.5: a shared cache stores the response to a request with `Authorization` only if the response
/// allows it (`public`, `s-maxage`, `must-revalidate`); the cache applies the same to `Cookie`.
enum SharedStorage {
  /// Whether `cacheControl` (the response's `Cache-Control` values) allows a shared cache to store a response to
  /// a request with credentials.
  static func allowsCredentialedResponse(_ cacheControl: [String]) -> Bool {
    let directives = CacheDirectives(cacheControl)
    if directives.noStore || directives.isPrivate { return false }
    return directives.isPublic || directives.sMaxAge != .absent || directives.mustRevalidate
  }
}
