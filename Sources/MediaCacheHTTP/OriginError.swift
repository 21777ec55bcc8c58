import MediaCache

/// A failure talking to the origin: what went wrong (`code`), the URL, and one line for a person
/// (`description`) naming the URL and what was wrong, so a person can act on it.
///
/// A struct with an open set of codes, as NIOFileSystem's `FileSystemError`, rather than an enum: a new code
/// does not break a caller's exhaustive `switch`. Match on the code
/// (`catch let error as OriginError where error.code == .timedOut`); the static functions named after each
/// code build the errors the client throws.
public struct OriginError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The failure with what it concerns (the former enum's cases, less the URL), for the read engine and the
  /// proxy.
  package enum Kind: Sendable, Equatable {
    case unsupportedScheme
    case invalidURL
    case httpStatus(status: Int, attempts: Int)
    case rangeNotSatisfiable(range: String, length: Int64?)
    case contentRangeMismatch(requested: String, received: String)
    case truncatedBody(expected: Int64, received: Int64, attempts: Int)
    case unsupportedContentEncoding(encoding: String)
    case tooManyRedirects
    case redirectNotAllowed(location: String)
    case connectionFailed(reason: String, attempts: Int)
    case timedOut(reason: String, attempts: Int)
    case inconsistentResponse(reason: String)
    case malformedResponse(reason: String)
    case tlsFailed(reason: String)
    case invalidTrustRoots(source: String, path: FilePath, reason: String)
    case invalidHeader(name: String, reason: String)
    case notStorable(reason: String)
    case objectChanged(cause: String)
  }

  /// The URL concerned, if one is (nil for `invalidTrustRoots`, which names a `path`).
  public let url: String?

  package var kind: Kind

  /// The origin's own answer of an `httpStatus` failure (status, fields and body, read whole up to
  /// `OriginAnswer.maxBody`) when the failing request read it: what a proxy relays to its player instead of
  /// asking the origin a second time. Not part of equality.
  package var answer: OriginAnswer?

  /// Whether both are the same failure (code, what it concerns, the URL); an `answer` read with one is not
  /// compared.
  public static func == (lhs: OriginError, rhs: OriginError) -> Bool {
    lhs.url == rhs.url && lhs.kind == rhs.kind
  }

  /// An error about `url`: any code but `invalidTrustRoots`, which concerns a file and no URL.
  package init(url: String, kind: Kind) {
    self.url = url
    self.kind = kind
  }

  /// An error that concerns no URL (`invalidTrustRoots`).
  private init(withoutURL kind: Kind) {
    self.url = nil
    self.kind = kind
  }

  /// What kind of failure (named as the case of `kind`).
  public var code: Code { Code(caseOf: kind) }

  /// The file or directory concerned, if one is (the trust roots of `invalidTrustRoots`).
  public var path: FilePath? {
    if case .invalidTrustRoots(_, let path, _) = kind { path } else { nil }
  }

  /// The HTTP status the origin answered with (code `httpStatus`).
  public var status: Int? {
    if case .httpStatus(let status, _) = kind { status } else { nil }
  }

  /// How many attempts were made, for the codes that are retried.
  public var attempts: Int? {
    switch kind {
    case .httpStatus(_, let attempts), .truncatedBody(_, _, let attempts), .connectionFailed(_, let attempts),
      .timedOut(_, let attempts):
      attempts
    default: nil
    }
  }

  /// An error of code `unsupportedScheme`.
  public static func unsupportedScheme(url: String) -> OriginError {
    OriginError(url: url, kind: .unsupportedScheme)
  }
  /// An error of code `invalidURL`.
  public static func invalidURL(_ value: String) -> OriginError { OriginError(url: value, kind: .invalidURL) }
  /// An error of code `httpStatus`.
  public static func httpStatus(url: String, status: Int, attempts: Int) -> OriginError {
    OriginError(url: url, kind: .httpStatus(status: status, attempts: attempts))
  }
  /// An error of code `rangeNotSatisfiable`.
  public static func rangeNotSatisfiable(url: String, range: String, length: Int64?) -> OriginError {
    OriginError(url: url, kind: .rangeNotSatisfiable(range: range, length: length))
  }
  /// An error of code `contentRangeMismatch`.
  public static func contentRangeMismatch(url: String, requested: String, received: String) -> OriginError {
    OriginError(url: url, kind: .contentRangeMismatch(requested: requested, received: received))
  }
  /// An error of code `truncatedBody`.
  public static func truncatedBody(url: String, expected: Int64, received: Int64, attempts: Int)
    -> OriginError
  { OriginError(url: url, kind: .truncatedBody(expected: expected, received: received, attempts: attempts)) }
  /// An error of code `unsupportedContentEncoding`.
  public static func unsupportedContentEncoding(url: String, encoding: String) -> OriginError {
    OriginError(url: url, kind: .unsupportedContentEncoding(encoding: encoding))
  }
  /// An error of code `tooManyRedirects`.
  public static func tooManyRedirects(url: String) -> OriginError {
    OriginError(url: url, kind: .tooManyRedirects)
  }
  /// An error of code `redirectNotAllowed`: the origin redirected `url` to `location`.
  public static func redirectNotAllowed(url: String, location: String) -> OriginError {
    OriginError(url: url, kind: .redirectNotAllowed(location: location))
  }
  /// An error of code `connectionFailed`.
  public static func connectionFailed(url: String, reason: String, attempts: Int) -> OriginError {
    OriginError(url: url, kind: .connectionFailed(reason: reason, attempts: attempts))
  }
  /// An error of code `timedOut`.
  public static func timedOut(url: String, reason: String, attempts: Int) -> OriginError {
    OriginError(url: url, kind: .timedOut(reason: reason, attempts: attempts))
  }
  /// An error of code `inconsistentResponse`.
  public static func inconsistentResponse(url: String, reason: String) -> OriginError {
    OriginError(url: url, kind: .inconsistentResponse(reason: reason))
  }
  /// An error of code `malformedResponse`.
  public static func malformedResponse(url: String, reason: String) -> OriginError {
    OriginError(url: url, kind: .malformedResponse(reason: reason))
  }
  /// An error of code `tlsFailed`.
  public static func tlsFailed(url: String, reason: String) -> OriginError {
    OriginError(url: url, kind: .tlsFailed(reason: reason))
  }
  /// An error of code `invalidTrustRoots`.
  public static func invalidTrustRoots(source: String, path: FilePath, reason: String) -> OriginError {
    OriginError(withoutURL: .invalidTrustRoots(source: source, path: path, reason: reason))
  }

  /// An error of code `invalidHeader`: an origin header field that cannot be sent (its value is not shown).
  public static func invalidHeader(name: String, reason: String) -> OriginError {
    OriginError(withoutURL: .invalidHeader(name: name, reason: reason))
  }
  /// An error of code `notStorable`.
  public static func notStorable(url: String, reason: String) -> OriginError {
    OriginError(url: url, kind: .notStorable(reason: reason))
  }
  /// An error of code `objectChanged`; `cause` (may be empty) says what changed it.
  public static func objectChanged(url: String, cause: String) -> OriginError {
    OriginError(url: url, kind: .objectChanged(cause: cause))
  }

  /// One line for a person: the URL, what failed and, where it was retried, after how many attempts.
  public var description: String {
    // Only invalidTrustRoots has no URL, and it names its path instead.
    let url = self.url ?? ""
    return switch kind {
    case .unsupportedScheme: "\(url): only http and https URLs can be fetched"
    case .invalidURL: "\(url) is not a valid URL"
    case .httpStatus(let status, let attempts):
      "\(url): origin answered HTTP \(status)\(attempts > 1 ? " (after \(attempts) attempts)" : "")"
    case .rangeNotSatisfiable(let range, let length):
      "\(url): origin refused range \(range) (416)\(length.map { "; length is \($0)" } ?? "")"
    case .contentRangeMismatch(let requested, let received):
      "\(url): asked for bytes \(requested), origin sent Content-Range \(received)"
    case .truncatedBody(let expected, let received, let attempts):
      "\(url): body ended after \(received) of \(expected) bytes (\(attempts) attempts)"
    case .unsupportedContentEncoding(let encoding):
      "\(url): origin sent Content-Encoding \(encoding) although identity was asked for"
    case .tooManyRedirects: "\(url): too many redirects"
    case .redirectNotAllowed(let location):
      "\(url): origin redirected to \(location.prefix(200)), whose host is not an allowed host"
    case .connectionFailed(let reason, let attempts):
      "\(url): \(reason) (after \(attempts) attempt\(attempts == 1 ? "" : "s"))"
    case .timedOut(let reason, let attempts):
      "\(url): timed out: \(reason) (after \(attempts) attempt\(attempts == 1 ? "" : "s"))"
    case .inconsistentResponse(let reason): "\(url): \(reason)"
    case .malformedResponse(let reason): "\(url): malformed response: \(reason)"
    case .tlsFailed(let reason): "\(url): \(reason)"
    case .invalidTrustRoots(let source, let path, let reason): "\(source) \(path): \(reason)"
    case .invalidHeader(let name, let reason):
      name.isEmpty ? "an origin header: \(reason)" : "origin header '\(name)': \(reason)"
    case .notStorable(let reason): "\(url): \(reason)"
    case .objectChanged(let cause):
      "\(url): the object changed version while it was being read\(cause.isEmpty ? "" : " (\(cause))")"
    }
  }

  /// Whether another attempt may succeed (connection trouble, 5xx, a cut-off body).
  var isRetryable: Bool {
    switch kind {
    case .connectionFailed, .timedOut, .truncatedBody: true
    case .httpStatus(let status, _): status >= 500
    default: false
    }
  }
}

extension OriginError {
  /// What kind of failure. New codes may be added: a `switch` over them outside this package needs an
  /// `@unknown default`.
  @nonexhaustive public enum Code: String, ErrorCode {
    /// Only `http` and `https` URLs are fetched.
    case unsupportedScheme
    /// The URL cannot be parsed.
    case invalidURL
    /// The origin answered with a status the cache cannot use (4xx, or 5xx after the retries).
    case httpStatus
    /// An origin header field (`OriginHeader`) that cannot be sent: a bad name, a control character in the value,
    /// or a field the cache sets itself.
    case invalidHeader
    /// A shared cache (the proxy) may not store the origin's response to a request with credentials: it does not
    /// say `public`, `s-maxage` or `must-revalidate` (RFC 9111 3.5).
    case notStorable
    /// The object moved to another version (the origin's changed, or another process replaced or removed the
    /// cached one) after the read had reported the version it delivers (its length or validators), and the rest
    /// of that version could not be had: no byte delivered yet, no strong ETag to ask the origin for it by, or
    /// the origin no longer has it. The bytes delivered before are of the old version; a new read gets the new
    /// one.
    case objectChanged
    /// The origin refused the range (416).
    case rangeNotSatisfiable
    /// A 206 whose `Content-Range` is not the range asked for.
    case contentRangeMismatch
    /// The body ended before the length the origin declared (after the retries).
    case truncatedBody
    /// The origin sent a compressed body although `identity` was asked for.
    case unsupportedContentEncoding
    /// More redirects than allowed, or a redirect cycle.
    case tooManyRedirects
    /// A redirect to a host the client may not fetch from (`OriginClient.Configuration.allowedRedirectHosts`),
    /// not followed.
    case redirectNotAllowed
    /// Connecting or reading failed (after the retries).
    case connectionFailed
    /// Connecting took longer than the connect timeout, or the origin sent nothing for the idle timeout (after
    /// the retries).
    case timedOut
    /// The origin's answer contradicts itself or what it said before (a length that changes within a version).
    case inconsistentResponse
    /// The origin's answer is not valid HTTP, or its head is larger than the client accepts (not retried).
    case malformedResponse
    /// The TLS handshake failed: an untrusted or expired certificate, one for another host, or no protocol or
    /// cipher in common. `reason` is one readable line starting `TLS:`. Not retried: the same origin presents the
    /// same certificate again.
    case tlsFailed
    /// A file or directory of trust roots (`source`: `CA file`, `SSL_CERT_FILE` or `SSL_CERT_DIR`) is missing,
    /// unreadable or holds no certificate.
    case invalidTrustRoots
  }
}

extension OriginError.Kind {
  /// A 416 whose `Content-Range` says the object has no bytes (`bytes */0`).
  var isRangeOfEmptyObject: Bool {
    if case .rangeNotSatisfiable(_, length: 0) = self { true } else { false }
  }
}
