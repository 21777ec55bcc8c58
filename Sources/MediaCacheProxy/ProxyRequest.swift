import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Synchronization

/// A request as the responder sees it.
struct ProxyRequest: Sendable {
  var method: HTTPMethod
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

  /// `%XX` escapes decoded; nil if an escape is malformed or the result is not UTF-8. The same as Foundation's
  /// `removingPercentEncoding` (tested), without its CFString round trip per call; text that is not all
  /// ASCII (rare in a request target) is left to Foundation.
  static func percentDecoded(_ text: Substring) -> String? {
    let utf8 = text.utf8
    guard utf8.contains(UInt8(ascii: "%")) else { return String(text) }
    guard utf8.allSatisfy({ $0 < 0x80 }) else { return text.removingPercentEncoding }
    func hexValue(_ byte: UInt8) -> UInt8? {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
      default: nil
      }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var index = utf8.startIndex
    while index != utf8.endIndex {
      let byte = utf8[index]
      utf8.formIndex(after: &index)
      guard byte == UInt8(ascii: "%") else {
        bytes.append(byte)
        continue
      }
      guard index != utf8.endIndex, let high = hexValue(utf8[index]) else { return nil }
      utf8.formIndex(after: &index)
      guard index != utf8.endIndex, let low = hexValue(utf8[index]) else { return nil }
      utf8.formIndex(after: &index)
      bytes.append(high << 4 | low)
    }
    return String(validating: bytes, as: UTF8.self)
  }
}
