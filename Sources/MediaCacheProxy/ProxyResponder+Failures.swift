import Foundation
import HTTPTypes
import Logging
import MediaCache
import MediaCacheHTTP
import NIOCore

// How a failure reaches the player: the origin's own answer relayed, or a status with a one-line reason.
extension ProxyResponder {
  /// Whether a failure of the cache's read means the player gets the origin's own answer, relayed
  /// (`passThrough`): a response the cache may not store, or a status it does not store (a 404, a 204, a 3xx
  /// without a usable `Location`, a 5xx after the retries).
  static func isRelayed(_ error: OriginError) -> Bool {
    error.code == .notStorable || error.code == .httpStatus
  }

  /// Relays the origin's answer to `request` after the cache's read failed with `error` (`isRelayed`): a URL
  /// whose response may not be stored is remembered (`passMemo`, so its next request costs one origin request),
  /// a relayed status is counted and logged as an origin failure. A status comes with the answer the cache's own
  /// request read (`OriginError.answer`), which is relayed as it is unless the player's request is conditional
  /// (the origin may answer it otherwise: it is asked with the player's conditions) or the answer does not fit
  /// this player (`OriginAnswer.fits`: the request was made for another player, with other forwarded fields, or
  /// the answer sets a cookie or is private).
  func relay(_ request: ProxyRequest, _ error: OriginError, origin: String, isPathForm: Bool) async throws
    -> ProxyResponse
  {
    if error.code == .notStorable {
      server.passMemo.note(origin)
    } else {
      noteRelayedStatus(error, url: origin)
    }
    let isConditional = Self.relayedRequestFields.contains { $0 != .range && request.headers[$0] != nil }
    if let answer = error.answer, !isConditional, answer.fits(forwarded: OriginClient.forwardedHeaders) {
      return try await relayed(
        answer.forwarded, isHead: request.method == .HEAD, origin: origin, isPathForm: isPathForm)
    }
    return try await passThrough(request, origin: origin, isPathForm: isPathForm)
  }

  /// The status and one-line reason a failure reaches the player as.
  func refusal(for error: any Error, url: String) -> any Error {
    switch error {
    case let error as OriginError:
      switch error.kind {
      case .unsupportedScheme: return Refusal(.forbidden, error.description)
      case .invalidURL: return Refusal(.badRequest, error.description)
      case .rangeNotSatisfiable(let range, let length):
        // The client's range, checked against the length the cache knows or the origin's 416.
        var refusal = Refusal(
          .rangeNotSatisfiable, "range \(range) is not satisfiable\(length.map { "; length is \($0)" } ?? "")"
        )
        if let length { refusal.headers[.contentRange] = "bytes */\(length)" }
        return refusal
      default: break
      }
      metrics.noteOriginError()
      logFailure("origin failed", error.description, url: url, errorURL: error.url)
      switch error.kind {
      case .httpStatus(let status, _) where (400..<500).contains(status):
        // The origin's own answer (404, 403, 410 ...) is the most useful thing to pass on.
        return Refusal(HTTPResponse.Status(code: status), "origin failed: \(error.description)")
      case .timedOut: return Refusal(.gatewayTimeout, "origin timed out: \(error.description)")
      case .objectChanged:
        // Reopened `maxReopens` times, and changed each time: another writer keeps replacing it.
        return Refusal(.serviceUnavailable, "the object kept changing: \(error.description)")
      default: return Refusal(.badGateway, "origin failed: \(error.description)")
      }
    case let error as StoreError:
      logFailure("cache failed", error.description, url: url, errorURL: nil)
      return Refusal(.internalServerError, "cache failed: \(error.description)")
    case is CancellationError:
      return error
    default:
      return Refusal(.internalServerError, "\(error)")
    }
  }

  /// Counts and logs (at `warning`, as any origin failure) a status the origin answered that is relayed.
  func noteRelayedStatus(_ error: OriginError, url: String) {
    metrics.noteOriginError()
    logFailure("origin failed", error.description, url: url, errorURL: error.url)
  }

  /// Logs a failure at `warning` with its cause, the URLs in it without their queries (on the I/O executor: a
  /// log handler's write blocks).
  /// A response cut while its body was being written: its access-log line whatever the cause, and a warning
  /// with the cause when it was the origin's or the cache's, not the client leaving (they went unlogged). The
  /// head goes out with the first body bytes: cut before them, the client got no response, only the closed
  /// connection, and the line says 502 (the origin or the cache failed) or 499 (the client left), as nginx's.
  func noteCut(
    _ error: any Error, path: Substring, response: ProxyResponse, writer: ProxyBodyWriter,
    logged: LoggedRequest?
  ) {
    let failed = error is OriginError || error is StoreError
    let status = writer.headSent ? response.status : HTTPResponse.Status(code: failed ? 502 : 499)
    logged?.write(to: server.accessLog, status: status, bytes: writer.bodyBytes, record: response.access)
    guard failed else { return }
    let when = writer.headSent ? "after \(writer.bodyBytes) body bytes" : "before its head was sent"
    logFailure("response cut \(when)", "\(error)", url: String(path), errorURL: (error as? OriginError)?.url)
  }

  private func logFailure(_ message: String, _ cause: String, url: String, errorURL: String?) {
    let logger = server.configuration.logger
    guard logger.logLevel <= .warning else { return }
    let redacted = LogRedaction.text(LogRedaction.text(cause, withoutQueryOf: errorURL), withoutQueryOf: url)
    let metadata: Logger.Metadata = [
      "url": "\(LogRedaction.text(url, withoutQueryOf: url))", "error": "\(redacted)",
    ]
    IOExecutor.shared.submit { logger.warning("\(message)", metadata: metadata) }
  }
}

/// A failure answered with a status and a one-line plain-text reason (the reason goes in the body only, never
/// in a header, since it may quote the URL).
struct Refusal: Error {
  var status: HTTPResponse.Status
  var reason: String
  var headers = HTTPFields()

  init(_ status: HTTPResponse.Status, _ reason: String) {
    self.status = status
    self.reason = reason
  }

  static var methodNotAllowed: Refusal {
    var refusal = Refusal(.methodNotAllowed, "only GET and HEAD are served")
    refusal.headers[.allow] = "GET, HEAD"
    return refusal
  }

  /// `If-Match` or `If-Unmodified-Since` does not hold for what the cache would send (`ConditionalRequest`).
  static var preconditionFailed: Refusal {
    Refusal(.preconditionFailed, "the cached representation does not meet the request's precondition")
  }

  var response: ProxyResponse {
    let text = "\(status.code) \(reason)\n"
    var headers = self.headers
    headers[.contentType] = "text/plain; charset=utf-8"
    headers[.xContentTypeOptions] = "nosniff"
    headers[.contentLength] = "\(text.utf8.count)"
    return ProxyResponse(status: status, headers: headers, body: .bytes(ByteBuffer(string: text)))
  }
}
