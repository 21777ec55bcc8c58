import AsyncHTTPClient
import Foundation
import MediaCache
import NIOCore
import NIOHTTP1

/// An origin response relayed as it comes and never stored (`OriginClient.forward`): what a proxy sends a
/// player for a response the cache may not store (`Cache-Control: no-store`, or `private` in a shared cache).
package struct ForwardedResponse: Sendable {
  /// The origin's status code.
  package var status: Int
  /// The origin's end-to-end fields, framing ones included (`Content-Length`, `Content-Range`) but no
  /// hop-by-hop field (RFC 9110 7.6.1, and those its `Connection` names).
  package var fields: [StoredHeaders.Field]
  /// The body, in the pieces the origin sends.
  package var body: ForwardedBody
  /// Whether this cache could have stored it (a 200 or 206 that RFC 9111 3 and 3.5 let it store): the URL
  /// need not be relayed any more.
  package var isStorable: Bool
  /// The URL of the response when a redirect led there, else nil (what relative references in a playlist or
  /// MPD resolve against).
  package var url: String? = nil
}

/// The body of a `ForwardedResponse`, read by one task: streamed from the origin, or read whole already
/// (`OriginAnswer`).
package final class ForwardedBody: @unchecked Sendable {
  private var iterator: HTTPClientResponse.Body.AsyncIterator?
  private var whole: ByteBuffer?

  init(_ body: HTTPClientResponse.Body) { iterator = body.makeAsyncIterator() }

  init(whole: ByteBuffer) { self.whole = whole }

  /// The next piece, nil at the end; throws the `OriginError` of a broken connection.
  package func next() async throws -> ByteBuffer? {
    if iterator == nil {
      defer { whole = nil }
      return whole.flatMap { $0.readableBytes > 0 ? $0 : nil }
    }
    return try await iterator?.next()
  }
}

extension OriginClient {
  /// Hop-by-hop fields (RFC 9110 7.6.1), lowercased: never relayed.
  static let hopByHopFields: Set<String> = [
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    "proxy-authenticate", "proxy-authorization",
  ]

  /// A `method` (GET or HEAD) request for `url` sent as the cache sends its own (the configured and forwarded
  /// headers, `Accept-Encoding: identity`) plus `fields` (the player's `Range`, `If-Range` and conditional
  /// fields), whose response is handed back unread and unchecked but for its hop-by-hop fields: nothing of it
  /// is stored. Redirects are followed as for the cache's requests; nothing is retried.
  package func forward(_ url: String, method: String, fields: [(String, String)]) async throws
    -> ForwardedResponse
  {
    if let trustFailure { throw trustFailure }
    try Self.validate(url)
    var request = HTTPClientRequest(url: url)
    request.method = method == "HEAD" ? .HEAD : .GET
    let own = requestHeaders(for: url, start: 0, end: nil, ifRange: nil)
    for (name, value) in own.headers { request.headers.add(name: name, value: value) }
    for (name, value) in fields { request.headers.add(name: name, value: value) }
    let started = ContinuousClock.now
    let response: HTTPClientResponse
    do {
      response = try await execute(request, url: url)
      ReaderMetrics.noteRequest(duration: .now - started, error: nil)
    } catch {
      ReaderMetrics.noteRequest(duration: .now - started, error: error)
      throw error
    }
    // The storage rules of the cache's own requests (`interpret`).
    let isStorable =
      (response.status.code == 200 || response.status.code == 206)
      && storageRefusal(
        response.headers, sharedWithCredentials: own.sharedWithCredentials, forwarded: own.forwarded) == nil
    return ForwardedResponse(
      status: Int(response.status.code),
      fields: Self.fields(of: response.headers, without: Self.hopByHopFields),
      body: ForwardedBody(response.body), isStorable: isStorable,
      url: Self.redirected(response, from: url))
  }
}
