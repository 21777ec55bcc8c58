import Foundation
import HTTPTypes
import MediaCacheHTTP
import MediaCacheStreaming
import NIOCore
import Synchronization

// Responses the cache may not store (RFC 9111 3: `Cache-Control: no-store`, or `private` in a shared cache) are
// relayed from the origin as they come, and nothing of them is written to disk. A URL found not storable is
// remembered for a while (`PassMemo`, Varnish's "hit-for-pass"), so its next requests go straight to the
// origin instead of costing a refused cache fetch first.

extension ProxyResponder {
  /// The player's fields relayed to the origin in a pass-through (its range and conditions).
  static let relayedRequestFields: [HTTPField.Name] = [
    .range, .ifRange, .ifNoneMatch, .ifModifiedSince, .ifMatch, .ifUnmodifiedSince,
  ]

  /// The largest body of a relayed status other than 2xx (an error page): it is read whole before it is sent.
  static let maxRelayedErrorBody = OriginAnswer.maxBody

  /// Relays `request` for `origin` to the origin and its response to the player, storing nothing. A status
  /// other than 2xx (the origin's 404, 410, 503 ...) goes with its body, read whole first, up to
  /// `maxRelayedErrorBody` (past it the player gets 502).
  ///
  /// A playlist or MPD is read whole (bounded as a cached one) and rewritten as `respondWithPlaylist` does, so
  /// what it names still goes through the proxy.
  func passThrough(_ request: ProxyRequest, origin: String, isPathForm: Bool) async throws -> ProxyResponse {
    let fields = Self.relayedRequestFields.compactMap { name in
      request.headers[name].map { (name.rawName, $0) }
    }
    let isHead = request.method == .HEAD
    let forwarded: ForwardedResponse
    do {
      forwarded = try await reader.client.forward(origin, method: isHead ? "HEAD" : "GET", fields: fields)
    } catch {
      throw refusal(for: error, url: origin)
    }
    if forwarded.isStorable {
      // Storable again: the next request goes through the cache.
      server.passMemo.forget(origin)
    }
    return try await relayed(forwarded, isHead: isHead, origin: origin, isPathForm: isPathForm)
  }

  /// The response to the player of an origin's answer that is relayed (`forwarded`): the origin's status,
  /// fields (but those the proxy sets itself) and body, an error page or a playlist read whole and bounded.
  func relayed(_ forwarded: ForwardedResponse, isHead: Bool, origin: String, isPathForm: Bool) async throws
    -> ProxyResponse
  {
    var headers = HTTPFields()
    var hops: [String] = []
    var declaredLength: Int64?
    for field in forwarded.fields {
      let lowercased = field.name.lowercased()
      if lowercased == "via" { hops.append(field.value) }
      if lowercased == "content-length" { declaredLength = Int64(field.value) }
      guard !Self.passOwnFieldNames.contains(lowercased), let name = HTTPField.Name(field.name) else {
        continue
      }
      headers.append(HTTPField(name: name, value: Self.headerSafe(field.value)))
    }
    let isSuccess = (200..<300).contains(forwarded.status)
    // A 200 or 206 was relayed because it may not be stored; any other status is never stored.
    headers[.cacheStatus] =
      "\(server.configuration.cacheStatusName); fwd=miss; "
      + (forwarded.status == 200 || forwarded.status == 206
        ? "detail=not-storable" : "fwd-status=\(forwarded.status)")
    headers[.via] = (hops.map(Self.headerSafe) + [via]).joined(separator: ", ")
    headers[.xContentTypeOptions] = "nosniff"
    headers[.contentSecurityPolicy] = "sandbox"
    let status = HTTPResponse.Status(code: forwarded.status)
    metrics.noteRequest(hit: false)
    if isHead || forwarded.status == 204 || forwarded.status == 304 {
      return ProxyResponse(status: status, headers: headers, body: .empty)
    }
    let body = forwarded.body
    let contentType = forwarded.fields.first { $0.name.lowercased() == "content-type" }?.value
    let isPlaylist = forwarded.status == 200 && Self.mayBePlaylist(contentType: contentType, url: origin)
    if !isSuccess || isPlaylist {
      // An error page, or a playlist to rewrite: bounded, read whole, sent with the proxy's own framing.
      let limit = isPlaylist ? HLSPlaylist.maxPlaylistBytes : Self.maxRelayedErrorBody
      var page = ByteBuffer()
      do {
        while let piece = try await body.next() {
          guard page.readableBytes + piece.readableBytes <= limit else {
            throw Refusal(.badGateway, "origin answered \(forwarded.status) with a body over \(limit) bytes")
          }
          page.writeImmutableBuffer(piece)
        }
      } catch let refusal as Refusal {
        throw refusal
      } catch {
        throw refusal(for: await reader.client.describe(error, url: origin), url: origin)
      }
      if isPlaylist,
        let rewritten = try rewrittenPlaylist(
          Data(page.readableBytesView), origin: origin, base: forwarded.url, contentType: contentType,
          isPathForm: isPathForm)
      {
        page = ByteBuffer(bytes: rewritten.body)
        headers[.eTag] = nil  // the rewritten text is not the origin's representation
      }
      headers[.contentLength] = "\(page.readableBytes)"
      if forwarded.status != 416 { headers[.contentRange] = nil }
      return ProxyResponse(status: status, headers: headers, body: .bytes(page))
    }
    let metrics = self.metrics
    let declared = declaredLength
    metrics.responseStarted()
    return ProxyResponse(
      status: status, headers: headers,
      body: .stream { writer in
        defer { metrics.responseEnded() }
        var sent: Int64 = 0
        while let piece = try await body.next() {
          sent += Int64(piece.readableBytes)
          metrics.noteServed(fromCache: 0, fromOrigin: Int64(piece.readableBytes))
          try await writer.write(piece)
        }
        if let declared, sent < declared {
          // The origin's body ended short: the player's connection is cut, not kept for a next request.
          throw ShortBody(missing: declared - sent)
        }
      })
  }

  /// Fields of a relayed response the proxy sets itself (lowercased). The origin's `Content-Length` stays: a
  /// streamed body keeps the origin's framing (a page read whole gets its own length set over it).
  static let passOwnFieldNames: Set<String> = [
    "via", "server", "cache-status", "x-content-type-options", "content-security-policy",
  ]
}

/// URLs whose responses the cache may not store, remembered for `PassMemo.duration` (at most `capacity` of
/// them): their requests are relayed at once.
final class PassMemo: Sendable {
  /// How long a URL is remembered (Varnish's hit-for-pass lasts two minutes too).
  static let duration: Duration = .seconds(120)
  /// The most URLs remembered; past it the oldest entries go.
  static let capacity = 4096

  private let entries = Mutex<[String: ContinuousClock.Instant]>([:])

  /// Whether `url` was found not storable less than `duration` ago.
  func contains(_ url: String) -> Bool {
    entries.withLock { entries in
      guard let until = entries[url] else { return false }
      if until > .now { return true }
      entries[url] = nil
      return false
    }
  }

  /// Remembers `url` as not storable.
  func note(_ url: String) {
    entries.withLock { entries in
      let now = ContinuousClock.now
      if entries.count >= Self.capacity {
        entries = entries.filter { $0.value > now }
        while entries.count >= Self.capacity, let oldest = entries.min(by: { $0.value < $1.value }) {
          entries[oldest.key] = nil
        }
      }
      entries[url] = now + Self.duration
    }
  }

  /// Forgets `url`.
  func forget(_ url: String) {
    _ = entries.withLock { $0.removeValue(forKey: url) }
  }
}
