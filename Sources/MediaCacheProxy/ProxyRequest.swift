import Foundation
import HTTPTypes
import MediaCache
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
  /// What the target names, as the connection's event loop resolved it (`ProxyResponder.resolvedTarget`):
  /// the task answering the request then neither parses and checks the origin URL again nor hashes its key.
  var resolvedTarget: LoopTargetMemo.Target?
  /// Why the request's `Host` fields make it a bad request (RFC 9112 §3.2: an HTTP/1.1 request has exactly
  /// one, any request at most one), or nil.
  var hostProblem: String?

  /// The longest request body kept.
  static let maxBodyBytes = 64 << 10

  init(head: HTTPRequestHead) {
    method = head.method
    uri = head.uri
    let target = RequestTarget(head.uri)
    (path, query) = (target.path, target.query)
    var fields = HTTPFields()
    fields.reserveCapacity(head.headers.count)
    for (name, value) in head.headers {
      if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
    }
    headers = fields
    hostProblem = Self.hostProblem(head)
  }

  /// Why `head`'s `Host` fields make it a bad request, or nil: a request with more than one, an HTTP/1.1
  /// request without one (HTTP/1.0 may leave it out).
  static func hostProblem(_ head: HTTPRequestHead) -> String? {
    switch head.headers["host"].count {
    case 1: return nil
    case 0:
      guard head.version.major > 1 || head.version.minor >= 1 else { return nil }
      return "an HTTP/1.1 request must have a Host field"
    default: return "the request has more than one Host field"
    }
  }

  /// Whether the client waits for `100 Continue` before sending the request's content: an HTTP/1.1 request
  /// with content and `Expect: 100-continue` (RFC 9110 §10.1.1), other than a GET or HEAD (whose content means
  /// nothing here), whose `Host` fields do not make it a bad request (refused at once instead).
  static func expectsContinue(_ head: HTTPRequestHead) -> Bool {
    guard head.method != .GET, head.method != .HEAD, head.version.major > 1 || head.version.minor >= 1,
      hostProblem(head) == nil,
      head.headers["expect"].contains(where: { $0.trimmingSpaces().lowercased() == "100-continue" })
    else { return false }
    return head.headers["transfer-encoding"].first != nil
      || head.headers["content-length"].contains(where: { $0.trimmingSpaces() != "0" })
  }

  /// The first value of query parameter `name`, percent-decoded (kept as sent if it does not decode); nil
  /// when absent (`RequestTarget.queryValue(_:)`).
  func queryValue(_ name: String) -> String? {
    RequestTarget(path: path, query: query).queryValue(name)
  }

  /// `%XX` escapes decoded; nil if an escape is malformed or the result is not UTF-8 (`Substring.percentDecoded`).
  static func percentDecoded(_ text: Substring) -> String? { text.percentDecoded }
}
