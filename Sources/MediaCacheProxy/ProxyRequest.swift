import Foundation
import HTTPTypes
import MediaCacheStreaming
import NIOCore
import NIOHTTP1
import Synchronization

/// A request as the responder sees it.
struct ProxyRequest: Sendable {
  var method: HTTPMethod
  /// The request target as sent (`path` and `query` are parts of it).
  var uri: String
  /// The target's path, before any `?` (not percent-decoded).
  var path: Substring
  /// The target's query, after the first `?`.
  var query: Substring?
  var headers: HTTPFields
  /// The body of a request other than GET and HEAD (`PUT /preload`), up to `maxBodyBytes`.
  var body = ByteBuffer()
  /// The body was longer than `maxBodyBytes` (and was not kept).
  var bodyTooLarge = false

  /// The longest request body kept.
  static let maxBodyBytes = 64 << 10

  init(head: HTTPRequestHead) {
    method = head.method
    uri = head.uri
    var target = Substring(head.uri)
    // An absolute-form target (`GET http://127.0.0.1:8089/metrics`, as sent to a proxy) names the path after
    // its authority.
    // An origin-form target (`/…`, every player's) is not searched (Foundation's `range(of:)`, used before,
    // went through CFString for every request).
    if target.utf8.first != UInt8(ascii: "/"), let scheme = target.firstRange(of: "://"),
      scheme.lowerBound > target.startIndex, target[..<scheme.lowerBound].allSatisfy(\.isLetter)
    {
      let authorityAndPath = target[scheme.upperBound...]
      target = authorityAndPath.firstIndex(of: "/").map { authorityAndPath[$0...] } ?? "/"
    }
    (path, query) = target.splitOnce(at: "?")
    var fields = HTTPFields()
    fields.reserveCapacity(head.headers.count)
    for (name, value) in head.headers {
      if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
    }
    headers = fields
  }

  /// The first value of query parameter `name`, percent-decoded (kept as sent if it does not decode); nil
  /// when absent.
  func queryValue(_ name: String) -> String? {
    guard let query else { return nil }
    for pair in query.split(separator: "&") {
      let key = pair.prefix { $0 != "=" }
      guard key == name else { continue }
      let value = pair[key.endIndex...].dropFirst()
      return Self.percentDecoded(value) ?? String(value)
    }
    return nil
  }

  /// `%XX` escapes decoded; nil if an escape is malformed or the result is not UTF-8 (`Substring.percentDecoded`).
  static func percentDecoded(_ text: Substring) -> String? { text.percentDecoded }
}
