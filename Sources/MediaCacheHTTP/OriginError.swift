/// A failure talking to the origin. Each case names the URL and what was wrong, so a person can act on it.
public enum OriginError: Error, Sendable, Equatable, CustomStringConvertible {
  /// Only `http` and `https` URLs are fetched.
  case unsupportedScheme(url: String)
  /// The URL cannot be parsed.
  case invalidURL(String)
  /// The origin answered with a status the cache cannot use (4xx, or 5xx after the retries).
  case httpStatus(url: String, status: Int, attempts: Int)
  /// The origin refused the range (416).
  case rangeNotSatisfiable(url: String, range: String, length: Int64?)
  /// A 206 whose `Content-Range` is not the range asked for.
  case contentRangeMismatch(url: String, requested: String, received: String)
  /// The body ended before the length the origin declared (after the retries).
  case truncatedBody(url: String, expected: Int64, received: Int64, attempts: Int)
  /// The origin sent a compressed body although `identity` was asked for.
  case unsupportedContentEncoding(url: String, encoding: String)
  /// More redirects than allowed, or a redirect cycle.
  case tooManyRedirects(url: String)
  /// Connecting or reading failed (after the retries).
  case connectionFailed(url: String, reason: String, attempts: Int)
  /// Connecting took longer than the connect timeout, or the origin sent nothing for the idle timeout (after
  /// the retries).
  case timedOut(url: String, reason: String, attempts: Int)
  /// The origin's answer contradicts itself or what it said before (a length that changes within a version).
  case inconsistentResponse(url: String, reason: String)
  /// The origin's answer is not valid HTTP, or its head is larger than the client accepts (not retried).
  case malformedResponse(url: String, reason: String)
  /// The TLS handshake failed: an untrusted or expired certificate, one for another host, or no protocol or
  /// cipher in common. `reason` is one readable line starting `TLS:`. Not retried: the same origin presents the
  /// same certificate again.
  case tlsFailed(url: String, reason: String)
  /// A file or directory of trust roots (`source`: `CA file`, `SSL_CERT_FILE` or `SSL_CERT_DIR`) is missing,
  /// unreadable or holds no certificate.
  case invalidTrustRoots(source: String, path: String, reason: String)

  /// One line for a person: the URL, what failed and, where it was retried, after how many attempts.
  public var description: String {
    switch self {
    case .unsupportedScheme(let url): "\(url): only http and https URLs can be fetched"
    case .invalidURL(let url): "\(url) is not a valid URL"
    case .httpStatus(let url, let status, let attempts):
      "\(url): origin answered HTTP \(status)\(attempts > 1 ? " (after \(attempts) attempts)" : "")"
    case .rangeNotSatisfiable(let url, let range, let length):
      "\(url): origin refused range \(range) (416)\(length.map { "; length is \($0)" } ?? "")"
    case .contentRangeMismatch(let url, let requested, let received):
      "\(url): asked for bytes \(requested), origin sent Content-Range \(received)"
    case .truncatedBody(let url, let expected, let received, let attempts):
      "\(url): body ended after \(received) of \(expected) bytes (\(attempts) attempts)"
    case .unsupportedContentEncoding(let url, let encoding):
      "\(url): origin sent Content-Encoding \(encoding) although identity was asked for"
    case .tooManyRedirects(let url): "\(url): too many redirects"
    case .connectionFailed(let url, let reason, let attempts):
      "\(url): \(reason) (after \(attempts) attempt\(attempts == 1 ? "" : "s"))"
    case .timedOut(let url, let reason, let attempts):
      "\(url): timed out: \(reason) (after \(attempts) attempt\(attempts == 1 ? "" : "s"))"
    case .inconsistentResponse(let url, let reason): "\(url): \(reason)"
    case .malformedResponse(let url, let reason): "\(url): malformed response: \(reason)"
    case .tlsFailed(let url, let reason): "\(url): \(reason)"
    case .invalidTrustRoots(let source, let path, let reason): "\(source) \(path): \(reason)"
    }
  }

  /// Whether another attempt may succeed (connection trouble, 5xx, a cut-off body).
  var isRetryable: Bool {
    switch self {
    case .connectionFailed, .timedOut, .truncatedBody: true
    case .httpStatus(_, let status, _): status >= 500
    default: false
    }
  }
}
