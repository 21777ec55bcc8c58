/// One request the origin received and what it answered, for assertions.
///
/// A record is added when the request has been read and its answer decided (the status is known then);
/// `bodyBytesSent` grows while the body is streamed, and `isComplete` becomes true once the origin is done
/// with the request: the whole response was written, the origin closed the connection on purpose
/// (`truncated`), or the client went away (`clientDisconnected`).
public struct RecordedRequest: Sendable, Equatable, CustomStringConvertible {
  /// Increasing in the order requests were read.
  public let id: Int
  /// Which TCP connection carried the request (increasing from 1 per origin): shows connection reuse.
  public let connectionID: Int
  /// `GET`, `HEAD`, ...
  public let method: String
  /// The request target as sent, query included (`/normal/clip?size=1000`).
  public let path: String
  /// The first path segment (`normal`, `flaky`, ...), whether or not it is a known mode.
  public let mode: String
  /// The object name: the rest of the path after `/<mode>/` without the query (for `files`, the relative
  /// file path percent-decoded).
  public let name: String
  /// The `Range` request header, if any.
  public let range: String?
  /// The `If-Range` request header, if any.
  public let ifRange: String?
  /// All request headers, names lowercased; repeated headers joined with ", ".
  public let headers: [String: String]
  /// The status code answered.
  public internal(set) var status: Int
  /// Body bytes written to the socket so far (for `gzip`, bytes of the gzip stream; for `chunked`, payload
  /// bytes without the chunk framing).
  public internal(set) var bodyBytesSent: Int
  /// The connection closed (not by the origin) before the response was completely written.
  public internal(set) var clientDisconnected: Bool
  /// The origin is done with this request.
  public internal(set) var isComplete: Bool

  /// One line: the request and connection numbers, method, path, status, body bytes sent and the range headers.
  public var description: String {
    var text = "#\(id) conn \(connectionID) \(method) \(path) -> \(status), \(bodyBytesSent) body bytes"
    if let range { text += ", Range: \(range)" }
    if let ifRange { text += ", If-Range: \(ifRange)" }
    if clientDisconnected { text += ", client disconnected" }
    if !isComplete { text += ", in progress" }
    return text
  }
}

/// Errors thrown by `TestOrigin`.
public enum TestOriginError: Error, Sendable, Equatable {
  /// `waitForCompletedRequests` did not see enough completed requests in time.
  case timedOut(name: String, expected: Int, completed: Int)
  /// The origin could not tell which port it is listening on.
  case noLocalAddress
  /// The `fileRoot` given to `start` is not a directory.
  case badFileRoot(String)
}
