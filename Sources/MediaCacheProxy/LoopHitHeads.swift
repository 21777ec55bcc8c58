import MediaCache
import MediaCacheHTTP
import NIOCore
import NIOHTTP1

/// The response heads of the hits one event loop answered lately, each kept with everything it was made from:
/// a hit whose head would come out the same (the same object, range and connection handling, and the same
/// recorded fields, age and second) is sent the kept head instead of a new one.
///
/// A hit's head has fifteen fields, built as `HTTPFields` and then as NIO's `HTTPHeaders`. Sending a kept one
/// took 0.004–0.007 ms off a hit's time to first byte (10th percentiles, about 2%) and 2–5 µs off its CPU,
/// measured (docs/PERFORMANCE.md, "A loop keeps the heads of its hits"). Players asking for the same ranges of
/// the same objects (the segments of a popular stream, a player's first bytes) ask for the same head many times
/// a second.
///
/// The head is a function of what `Source` and `Key` hold, so a head is reused only where it would be made
/// again byte for byte: the recorded fields (content type, validators, the origin's stored fields, the length),
/// the `Age` (whole seconds), the second (`Date` when the origin sent none), the range and whether it is a
/// part, the request's HTTP version and whether the connection stays open. Everything else in a hit's head is
/// the server's and fixed for its life (`Via`, `Cache-Status` of a hit, `Server`, the security fields). What
/// decides whether the request is a hit at all is checked per request as before (`ProxyResponder.hitNow`); only
/// the head is kept. At most `capacity` heads are kept; when full, the memo starts again empty.
final class LoopHitHeads: @unchecked Sendable {
  /// What a head answers.
  struct Key: Hashable {
    var objectID: ObjectID
    /// The absolute bytes served, and whether as a part (`206`: the request had a `Range`) or whole (`200`).
    var range: Range<Int64>, partial: Bool
    /// The request's HTTP version, and whether the connection stays open after the response.
    var versionMajor: Int, versionMinor: Int, keepAlive: Bool
  }

  /// What a head was made from, besides its key.
  struct Source: Equatable {
    /// The object's length and what the cache recorded from the origin.
    var length: Int64
    var contentType: String?, etag: String?, lastModified: String?
    var storedHeaders: StoredHeaders?
    /// The response's age in whole seconds (nil: no freshness recorded), and the second (since 1970) the head
    /// was made in.
    var age: Int64?, second: Int64
  }

  /// The most heads kept.
  static let capacity = 256

  // Used only on `loop`.
  private let loop: any EventLoop
  private var heads: [Key: (source: Source, head: HTTPResponseHead)] = [:]

  init(loop: any EventLoop) {
    self.loop = loop
  }

  /// The head kept for `key` if it was made from `source`; else the one `make` returns, kept for next time.
  func head(for key: Key, from source: Source, make: () -> HTTPResponseHead) -> HTTPResponseHead {
    loop.preconditionInEventLoop()
    if let kept = heads[key], kept.source == source { return kept.head }
    let head = make()
    if heads.count >= Self.capacity, heads[key] == nil { heads.removeAll(keepingCapacity: true) }
    heads[key] = (source, head)
    return head
  }
}

extension LoopHitHeads.Source {
  /// What a hit's head is made from, in `second`.
  init(_ hit: CachedRange, second: Int64) {
    self.init(
      length: hit.length, contentType: hit.contentType, etag: hit.etag, lastModified: hit.lastModified,
      storedHeaders: hit.storedHeaders, age: hit.freshness?.age, second: second)
  }
}
