import MediaCache
import NIOCore
import NIOHTTP1

/// An origin's answer the cache does not store (a status other than 200, 206 and 416: a 404, a 204, a 5xx after
/// the retries), kept whole with the error it became (`OriginError.answer`), so a proxy relays it as it is
/// instead of asking the origin again.
package struct OriginAnswer: Sendable {
  /// The largest body kept; the answer of a longer one is not (the proxy asks the origin again, and relays that
  /// answer if it can).
  package static let maxBody = 1 << 20

  /// The origin's status code.
  package var status: Int
  /// The origin's end-to-end fields, framing ones included but no hop-by-hop field (as `ForwardedResponse`).
  package var fields: [StoredHeaders.Field]
  /// The whole body.
  package var body = ByteBuffer()
  /// The player's fields the request carried (`OriginClient.forwardedHeaders`).
  package var forwardedFields: [OriginHeader]
  /// Whether it may be given to players other than the one it was asked for: it sets no cookie and says
  /// neither `private` nor `no-store`.
  package var isShareable: Bool

  /// How long the body may take after the head; an answer not whole by then is not kept.
  static let readTimeout = TimeAmount.seconds(2)

  init(_ head: HTTPResponseHead, forwarded: [OriginHeader]) {
    status = Int(head.status.code)
    fields = OriginClient.fields(of: head.headers, without: OriginClient.hopByHopFields)
    forwardedFields = forwarded
    let directives = CacheDirectives(head.headers["Cache-Control"])
    isShareable =
      !directives.isPrivate && !directives.noStore
      && !fields.contains { ["set-cookie", "set-cookie2"].contains($0.name.lowercased()) }
  }

  /// Whether a player whose request forwards `forwarded` may be given this answer: it is shareable, and that
  /// player's request would have carried the same fields (so the origin was asked what it would have been
  /// asked for that player). A flight serves every player of its object, but carries the fields of the one it
  /// was started for.
  package func fits(forwarded current: [OriginHeader]) -> Bool {
    func key(_ fields: [OriginHeader]) -> [String] {
      fields.map { "\($0.name.lowercased()):\($0.value)" }.sorted()
    }
    return isShareable && key(forwardedFields) == key(current)
  }

  /// Adds a part of the body; false when the body would grow past `maxBody` (the part is not added).
  mutating func append(_ part: ByteBuffer) -> Bool {
    guard body.readableBytes + part.readableBytes <= Self.maxBody else { return false }
    body.writeImmutableBuffer(part)
    return true
  }

  /// The answer as a relayed response, with a reader of its own (each player relayed it reads the same bytes).
  package var forwarded: ForwardedResponse {
    ForwardedResponse(status: status, fields: fields, body: ForwardedBody(whole: body), isStorable: false)
  }
}
