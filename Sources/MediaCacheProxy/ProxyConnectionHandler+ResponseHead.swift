import HTTPTypes
import MediaCacheHTTP
import NIOHTTP1

extension ProxyConnectionHandler {
  /// NIO's head of `response` (see below).
  static func responseHead(_ response: ProxyResponse, version: HTTPVersion, keepAlive: Bool)
    -> HTTPResponseHead
  {
    responseHead(status: response.status, headers: response.headers, version: version, keepAlive: keepAlive)
  }

  /// NIO's head of a response with `status` and `fields`: `Date` (unless among them), `Server`, the fields, and
  /// `Connection` as the connection needs it.
  static func responseHead(
    status: HTTPResponse.Status, headers fields: HTTPFields, version: HTTPVersion, keepAlive: Bool
  ) -> HTTPResponseHead {
    var head = responseHead(status: status, headers: fields, version: version, extraCapacity: 1)
    addConnection(to: &head.headers, version: version, keepAlive: keepAlive)
    return head
  }

  /// `responseHead(status:headers:version:keepAlive:)` without `Connection`, with room for `extraCapacity`
  /// more fields.
  static func responseHead(
    status: HTTPResponse.Status, headers fields: HTTPFields, version: HTTPVersion, extraCapacity: Int
  ) -> HTTPResponseHead {
    var headers = HTTPHeaders()
    headers.reserveCapacity(fields.count + 2 + extraCapacity)
    // A stored response keeps the origin's Date (its Age says how old it is); every other gets the time now.
    // (A plain search: `HTTPFields`' subscript would also join the values found into a new String.)
    if !fields.contains(where: { $0.name == .date }) {
      headers.add(name: "date", value: HTTPDate.now())
    }
    headers.add(name: "server", value: "MediaCache")
    for field in fields { headers.add(name: field.name.rawName, value: field.value) }
    return HTTPResponseHead(
      version: version,
      status: HTTPResponseStatus(statusCode: status.code, reasonPhrase: status.reasonPhrase),
      headers: headers)
  }

  /// `Connection` as the connection needs it: `close` when it ends after the response, `keep-alive` to an
  /// HTTP/1.0 client it stays open for.
  static func addConnection(to headers: inout HTTPHeaders, version: HTTPVersion, keepAlive: Bool) {
    if !keepAlive {
      headers.replaceOrAdd(name: "connection", value: "close")
    } else if version.major == 1 && version.minor == 0 {
      headers.replaceOrAdd(name: "connection", value: "keep-alive")
    }
  }

  /// The head of a loop hit of `range` (of an object of `length`): `template`, the head of the hit's fields
  /// that do not depend on its range (`ProxyResponder.hitHeadersBeforeBody`, without `Connection`), with the
  /// body's fields and `Connection` added after them, so the head is the one `responseHead(status:headers:
  /// version:keepAlive:)` makes of `ProxyResponder.hitHeaders` field for field and in the same order.
  static func hitHead(
    _ template: HTTPResponseHead, range: Range<Int64>, length: Int64, partial: Bool, version: HTTPVersion,
    keepAlive: Bool
  ) -> HTTPResponseHead {
    var head = template
    let count = Int64(range.count)
    head.headers.add(name: HTTPField.Name.contentLength.rawName, value: String(count))
    if partial {
      head.headers.add(
        name: HTTPField.Name.contentRange.rawName,
        value: ProxyResponder.contentRange(first: range.lowerBound, count: count, length: length))
    }
    addConnection(to: &head.headers, version: version, keepAlive: keepAlive)
    return head
  }
}
