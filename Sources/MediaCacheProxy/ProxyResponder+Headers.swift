import Foundation
import HTTPTypes
import MediaCache
import MediaCacheHTTP

// The header fields of proxied responses: the origin's stored ones, the proxy's own, and those of a 304.
extension ProxyResponder {
  /// Headers of every proxied body. Values from the origin are reduced to visible ASCII so nothing it sends can
  /// split or inject a header; `nosniff` and a sandbox policy keep a browser from running what an origin sends
  /// as a page of the proxy's own origin.
  ///
  /// The origin's other end-to-end fields (`stored`: `Cache-Control`, `Expires`, `Date`, `Content-Disposition`,
  /// `Vary`, custom ones) go out as stored, but for those the proxy sets itself: its `Age` (from `freshness`),
  /// `Via` (the stored one's hops, then the proxy's), `Server`, framing and security fields.
  static func headers(
    contentType: String?, etag: String?, lastModified: String?, stored: StoredHeaders? = nil,
    freshness: ObjectFreshness? = nil, cacheStatus: String, via: String
  ) -> HTTPFields {
    var headers = HTTPFields()
    // The stored fields, the nine below, and the body's two (`addBodyFields`): one allocation, not one per
    // doubling (five for a hit's fields, measured).
    headers.reserveCapacity((stored?.fields.count ?? 0) + 11)
    var hops: [String] = []
    for field in stored?.fields ?? [] {
      // (The name's canonical form is lowercased once, by HTTPTypes.)
      guard let name = HTTPField.Name(field.name) else { continue }
      if name == .via { hops.append(field.value) }
      guard !ownFieldNames.contains(name.canonicalName) else { continue }
      headers.append(HTTPField(name: name, value: headerSafe(field.value)))
    }
    // None of these is among the stored ones (`ownFieldNames`): appended, without a search for one to replace.
    if let freshness { headers.append(HTTPField(name: .age, value: "\(freshness.age)")) }
    headers.append(HTTPField(name: .cacheStatus, value: cacheStatus))
    let via = hops.isEmpty ? via : (hops.map(headerSafe) + [via]).joined(separator: ", ")
    headers.append(HTTPField(name: .via, value: via))
    headers.append(HTTPField(name: .acceptRanges, value: "bytes"))
    headers.append(
      HTTPField(name: .contentType, value: contentType.map(headerSafe) ?? "application/octet-stream"))
    if let etag { headers.append(HTTPField(name: .eTag, value: headerSafe(etag))) }
    if let lastModified { headers.append(HTTPField(name: .lastModified, value: headerSafe(lastModified))) }
    headers.append(HTTPField(name: .xContentTypeOptions, value: "nosniff"))
    headers.append(HTTPField(name: .contentSecurityPolicy, value: "sandbox"))
    return headers
  }

  /// Stored fields the proxy sends its own of, or none of (lowercased): `headers(...)`. The URL a redirect led
  /// to (`OriginClient.responseURLField`) is the cache's own record, not the origin's field.
  static let ownFieldNames: Set<String> = [
    "age", "via", "server", "cache-status", "accept-ranges", "x-content-type-options",
    "content-security-policy",
    "content-length", "content-range", "content-type", "etag", "last-modified", "connection", "keep-alive",
    "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    OriginClient.responseURLField.lowercased(),
  ]

  /// `Via` of the responses the proxy forwards (`ProxyServer.via`, made once).
  var via: String { server.via }

  /// `304 Not Modified` to a conditional GET or HEAD (`ConditionalRequest`): the `ETag` (or, without one, the
  /// `Last-Modified`) of the representation the client holds, no body and no representation fields (RFC 9110
  /// §15.4.5).
  func notModified(_ bytes: CachedBytes, use: CacheUse) -> ProxyResponse {
    let freshness = bytes.freshness
    // The fields a 200 would have had that a 304 must repeat (RFC 9110 §15.4.5), from the stored ones.
    let repeated = bytes.storedHeaders.map { stored in
      StoredHeaders(
        receivedAt: stored.receivedAt,
        fields: stored.fields.filter { Self.repeatedIn304.contains($0.name.lowercased()) })
    }
    var headers = Self.headers(
      contentType: nil, etag: nil, lastModified: nil, stored: repeated,
      freshness: freshness, cacheStatus: cacheStatus(use, bytes.revalidation, freshness), via: via)
    for name in [HTTPField.Name.acceptRanges, .contentType, .xContentTypeOptions, .contentSecurityPolicy] {
      headers[name] = nil
    }
    if let etag = bytes.etag {
      headers[.eTag] = Self.headerSafe(etag)
    } else if let lastModified = bytes.lastModified {
      headers[.lastModified] = Self.headerSafe(lastModified)
    }
    return ProxyResponse(status: .notModified, headers: headers, body: .empty)
  }

  /// Stored fields a 304 repeats (RFC 9110 §15.4.5), lowercased.
  static let repeatedIn304: Set<String> = ["cache-control", "content-location", "date", "expires", "vary"]

  static func headerSafe(_ value: String) -> String {
    // Most values are visible ASCII already: checked byte by byte, they are returned as they are.
    if value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return value }
    let visible = value.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }
    return String(String.UnicodeScalarView(visible))
  }

  /// RFC 9110 §13.1.5: an entity tag matches only strongly; a date matches only exactly.
  static func ifRangeMatches(_ value: String, etag: String?, lastModified: String?) -> Bool {
    let trimmed = value.trimmingSpaces()
    if trimmed.hasPrefix("\"") || trimmed.hasPrefix("W/") {
      guard let etag, !etag.hasPrefix("W/"), !trimmed.hasPrefix("W/") else { return false }
      return etag == trimmed
    }
    guard let lastModified else { return false }
    return lastModified == trimmed
  }
}
