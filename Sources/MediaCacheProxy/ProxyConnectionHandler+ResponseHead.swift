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
    var headers = HTTPHeaders()
    headers.reserveCapacity(fields.count + 3)
    // A stored response keeps the origin's Date (its Age says how old it is); every other gets the time now.
    // (A plain search: `HTTPFields`' subscript would also join the values found into a new String.)
    if !fields.contains(where: { $0.name == .date }) {
      headers.add(name: "date", value: HTTPDate.now())
    }
    headers.add(name: "server", value: "MediaCache")
    for field in fields { headers.add(name: field.name.rawName, value: field.value) }
    if !keepAlive {
      headers.replaceOrAdd(name: "connection", value: "close")
    } else if version.major == 1 && version.minor == 0 {
      headers.replaceOrAdd(name: "connection", value: "keep-alive")
    }
    return HTTPResponseHead(
      version: version,
      status: HTTPResponseStatus(statusCode: status.code, reasonPhrase: status.reasonPhrase),
      headers: headers)
  }
}
