import AsyncHTTPClient
import Foundation
import MediaCache
import NIOHTTP1

// What an origin's response head means to the cache: the range its body holds, the metadata and end-to-end
// fields stored with the object, or the `OriginError` the cache cannot use it for.
extension OriginClient {
  /// What a response head means for a request of `start..<end`: where its body starts, how long it should
  /// be, and what the origin said; throws the `OriginError` for anything the cache cannot use.
  static func interpret(
    status: HTTPResponseStatus, headers: HTTPHeaders, url: String, start: Int64, end: Int64?,
    sharedWithCredentials: Bool = false, forwarded: Set<String> = [], responseURL: String? = nil,
    freshness: FreshnessPolicy = FreshnessPolicy(),
    sharedCache: Bool = false
  )
    throws(OriginError) -> ResponseHead
  {
    let rangeText = rangeText(start, end)
    if status.code == 200 || status.code == 206,
      let reason = MediaCacheHTTP.storageRefusal(
        headers, policy: freshness, sharedCache: sharedCache, sharedWithCredentials: sharedWithCredentials,
        forwarded: forwarded)
    {
      throw .notStorable(url: url, reason: reason)
    }
    if let encoding = headers.first(name: "Content-Encoding"), encoding.lowercased() != "identity" {
      throw .unsupportedContentEncoding(url: url, encoding: encoding)
    }
    var metadata = metadata(headers, responseURL: responseURL == url ? nil : responseURL)
    let contentLength = headers.first(name: "Content-Length").flatMap { Int64($0) }
    switch status.code {
    case 206:
      guard let header = headers.first(name: "Content-Range"), let parsed = parseContentRange(header),
        let first = parsed.first, let last = parsed.last
      else {
        throw .contentRangeMismatch(
          url: url, requested: rangeText, received: headers.first(name: "Content-Range") ?? "none")
      }
      metadata.length = parsed.total
      // Without a total (`/*`), a range that stops short of what was asked, or an open-ended one, ends where
      // the object ends.
      if parsed.total == nil, end.map({ last + 1 < $0 }) ?? true { metadata.length = last + 1 }
      let endOK =
        end.map { last + 1 == $0 || (last + 1 < $0 && (parsed.total.map { last + 1 == $0 } ?? true)) } ?? true
      guard first == start, last >= first, endOK, parsed.total.map({ last < $0 }) ?? true else {
        throw .contentRangeMismatch(url: url, requested: rangeText, received: header)
      }
      return ResponseHead(
        start: first, expectedBodyLength: last - first + 1, isPartial: true, metadata: metadata)
    case 200:
      metadata.length = contentLength
      return ResponseHead(start: 0, expectedBodyLength: contentLength, isPartial: false, metadata: metadata)
    case 416:
      let total = headers.first(name: "Content-Range").flatMap { parseContentRange($0)?.total }
      throw .rangeNotSatisfiable(url: url, range: rangeText, length: total)
    default:
      throw .httpStatus(url: url, status: Int(status.code), attempts: 1)
    }
  }

  /// The metadata of a response with `headers`; `responseURL`, where a redirect led (nil: the request's own
  /// URL), is stored as `responseURLField` (`StoredHeaders.settingResponseURL`).
  static func metadata(_ headers: HTTPHeaders, responseURL: String? = nil) -> OriginMetadata {
    OriginMetadata(
      length: nil, etag: headers.first(name: "ETag"), lastModified: headers.first(name: "Last-Modified"),
      contentType: headers.first(name: "Content-Type"),
      headers: storedFields(headers, receivedAt: Date()).settingResponseURL(responseURL))
  }

  /// The stored field that holds the URL a response came from when a redirect led there, not the request's
  /// (`CachedBytes.responseURL`): what relative references in a playlist or MPD resolve against, as players
  /// resolve them against the URL they were redirected to. Never stored from an origin's own fields, never
  /// sent to a client.
  package static let responseURLField = "MediaCache-Response-URL"

  /// Fields a cache never stores (lowercased): hop-by-hop (RFC 9110 7.6.1), framing (the cache's responses
  /// have their own), the validators and type (the manifest's own fields), `Set-Cookie` (one user's, not for a
  /// shared copy) and `Cache-Status` (each cache adds its own).
  static let unstoredFields = hopByHopFields.union([
    "content-length", "content-range", "accept-ranges", "content-type", "etag", "last-modified", "set-cookie",
    "set-cookie2", "cache-status", "content-md5", "digest", "content-digest", "repr-digest",
    responseURLField.lowercased(),
  ])

  /// The end-to-end fields of a response worth storing with the object (all but `unstoredFields` and those
  /// its `Connection` names), at most `StoredHeaders.maxBytes` of them. `cachingFields` go first, so a
  /// response with more fields than the bound loses others rather than those.
  static func storedFields(_ headers: HTTPHeaders, receivedAt: Date) -> StoredHeaders {
    let fields = fields(of: headers, without: unstoredFields)
    let caching = fields.filter { cachingFields.contains($0.name.lowercased()) }
    let others = fields.filter { !cachingFields.contains($0.name.lowercased()) }
    return StoredHeaders(receivedAt: receivedAt, fields: caching + others)
  }

  /// Fields the copy's freshness, revalidation and reuse depend on (lowercased). Stored before the others: the
  /// order of fields of different names carries no meaning (RFC 9110 5.3), and fields of one name keep theirs.
  static let cachingFields: Set<String> = [
    "cache-control", "expires", "date", "age", "vary", "pragma", "content-location", "content-disposition",
  ]

  /// The fields of `headers` but those named in `excluded` (lowercased) or by its `Connection` field.
  static func fields(of headers: HTTPHeaders, without excluded: Set<String>) -> [StoredHeaders.Field] {
    let named = Set(
      headers[canonicalForm: "Connection"].map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
    return headers.compactMap { field in
      let name = field.name.lowercased()
      guard !excluded.contains(name), !named.contains(name) else { return nil }
      return StoredHeaders.Field(name: field.name, value: field.value)
    }
  }

  /// `bytes FIRST-LAST/TOTAL`, `bytes FIRST-LAST/*` or `bytes */TOTAL`.
  static func parseContentRange(_ value: String) -> (first: Int64?, last: Int64?, total: Int64?)? {
    let trimmed = value.trimmingCharacters(in: .whitespaces)
    guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
    let parts = trimmed.dropFirst(6).split(separator: "/", maxSplits: 1)
    guard parts.count == 2 else { return nil }
    let total: Int64? = parts[1] == "*" ? nil : Int64(parts[1])
    if parts[1] != "*" && total == nil { return nil }
    if parts[0] == "*" { return (nil, nil, total) }
    let bounds = parts[0].split(separator: "-", maxSplits: 1)
    guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]) else { return nil }
    return (first, last, total)
  }
}

extension OriginClient {
  /// Where a redirect led `response` (its URL), nil when it is `url`'s own.
  static func redirected(_ response: HTTPClientResponse, from url: String) -> String? {
    response.url.map(\.absoluteString).flatMap { $0 == url ? nil : $0 }
  }
}

extension StoredHeaders {
  /// The URL the stored response came from when a redirect led there (`OriginClient.responseURLField`), else
  /// nil.
  public var responseURL: String? {
    let name = OriginClient.responseURLField.lowercased()
    return fields.first { $0.name.lowercased() == name }?.value
  }

  /// These fields with `responseURLField` set to `url`, first (the fields past `maxBytes` are dropped), or
  /// removed for nil.
  func settingResponseURL(_ url: String?) -> StoredHeaders {
    // (Most responses: no redirect, no record to drop; no copy made.)
    if url == nil && responseURL == nil { return self }
    let name = OriginClient.responseURLField.lowercased()
    let others = fields.filter { $0.name.lowercased() != name }
    let own = url.map { [Field(name: OriginClient.responseURLField, value: $0)] } ?? []
    return StoredHeaders(receivedAt: receivedAt, fields: own + others)
  }
}
