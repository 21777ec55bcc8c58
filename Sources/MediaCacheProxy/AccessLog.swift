import Foundation
import Logging
import MediaCache
import MediaCacheHTTP
import NIOCore
import NIOHTTP1
import Synchronization

/// What one response served, filled in as its body goes out (`BodyAccounting`, an immediate hit), for its
/// access-log line.
final class AccessRecord: Sendable {
  private struct State {
    var objectID: ObjectID?
    var fromCache: Int64 = 0
    var fromOrigin: Int64 = 0
  }
  private let state = Mutex(State())
  /// The origin requests started while the response is made (`OriginClient.requestCounter`, taken when the
  /// record is made, within the request's task).
  private let originRequests = OriginClient.requestCounter

  /// Notes the object and the bytes served so far from the cache and from the origin.
  func note(_ objectID: ObjectID, fromCache: Int64, fromOrigin: Int64) {
    state.withLock { $0 = State(objectID: objectID, fromCache: fromCache, fromOrigin: fromOrigin) }
  }

  /// The object, and `hit` (every byte from the cache), `miss` (every byte from the origin), `partial` (both)
  /// or `-` (no body bytes of an object).
  var summary: (objectID: ObjectID?, cache: String, originBytes: Int64, originRequests: Int) {
    state.withLock { state in
      let cache =
        switch (state.fromCache > 0, state.fromOrigin > 0) {
        case (true, false): "hit"
        case (false, true): "miss"
        case (true, true): "partial"
        case (false, false): "-"
        }
      return (state.objectID, cache, state.fromOrigin, originRequests?.value ?? 0)
    }
  }
}

/// One line per answered request through the proxy's logger at `info`: time, method, path (never its query,
/// where signatures and tokens travel), object id, status, body bytes, duration, whether the bytes came from
/// the cache (`hit`, `partial`, `miss`), how many from the origin, and how many origin requests it started. Written on the I/O executor: a log
/// handler's write is a blocking call, and the line is made on an event loop.
struct AccessLog: Sendable {
  let logger: Logger

  /// Whether lines are written at all (the logger's level lets `info` through).
  var isOn: Bool { logger.logLevel <= .info }

  func write(
    method: HTTPMethod, path: Substring, status: Int, bytes: Int, since start: NIODeadline,
    record: AccessRecord?
  ) {
    guard isOn else { return }
    let elapsed = Double((NIODeadline.now() - start).nanoseconds) / 1e6
    let (objectID, cache, originBytes, originRequests) = record?.summary ?? (nil, "-", 0, 0)
    let metadata: Logger.Metadata = [
      "method": "\(method.rawValue)", "path": "\(path)", "object": "\(objectID?.hex ?? "-")",
      "status": "\(status)", "bytes": "\(bytes)", "duration_ms": "\(String(format: "%.3f", elapsed))",
      "cache": "\(cache)", "origin_bytes": "\(originBytes)", "origin_requests": "\(originRequests)",
    ]
    let logger = self.logger
    IOExecutor.shared.submit { logger.info("request", metadata: metadata) }
  }
}

/// Text for logs without the queries of URLs in it (signatures, tokens).
enum LogRedaction {
  /// `text` with every occurrence of `url` replaced by `url` without its query (and fragment).
  static func text(_ text: String, withoutQueryOf url: String?) -> String {
    guard let url, let cut = url.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return text }
    return text.replacingOccurrences(of: url, with: String(url[..<cut]) + "?…")
  }
}
