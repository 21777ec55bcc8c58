import MediaCache
import MediaCacheHTTP
import NIOCore
import NIOHTTP1

/// The response heads of the hits one event loop answered lately, without the fields that depend on a hit's
/// range, each kept with everything it was made from: a hit of an object whose head would come out the same
/// (the same recorded fields, age and second, the same status and HTTP version) is sent the kept head with its
/// range's fields and `Connection` added (`ProxyConnectionHandler.hitHead`) instead of a new one.
///
/// A hit's head has fifteen fields, built as `HTTPFields` and then as NIO's `HTTPHeaders`. Sending a kept one
/// took 0.004–0.007 ms off a hit's time to first byte (10th percentiles, about 2%) and 2–5 µs off its CPU,
/// measured (docs/PERFORMANCE.md, "A loop keeps the heads of its hits"). It was kept per range until
/// 2026-12-06: random ranges of an object (a player seeking, many players at different places in a stream)
/// then made every head anew, about 5% of the CPU of 64 KiB hits; now the head is kept per object and only
/// `Content-Length`, `Content-Range` and `Connection` are added per hit. The last whole head made of it is kept
/// too, and sent as it is to a hit of the same range and connection handling.
///
/// The kept head is a function of what `Source` and `Key` hold (the whole head also of the range and of whether
/// the connection stays open, which `hitHead` adds), so a head is reused only where it would be made again byte
/// for byte: the recorded fields (content type, validators, the origin's stored fields, the length),
/// the `Age` (whole seconds), the second (`Date` when the origin sent none), whether the hit is a part, and the
/// request's HTTP version. Everything else in a hit's head is the server's and fixed for its life (`Via`,
/// `Cache-Status` of a hit, `Server`, the security fields). What decides whether the request is a hit at all is
/// checked per request as before (`ProxyResponder.hitNow`); only the head is kept. At most `capacity` objects'
/// heads are kept (each with its last whole head); when full, the memo starts again empty.
final class LoopHitHeads: @unchecked Sendable {
  /// What a head answers.
  struct Key: Hashable {
    var objectID: ObjectID
    /// Whether the hit is a part (`206`: the request had a `Range`) or the whole object (`200`).
    var partial: Bool
    /// The request's HTTP version.
    var versionMajor: Int, versionMinor: Int
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
  private var heads: [Key: Entry] = [:]

  /// A kept head: what it was made from, the head without the range's fields, and the last whole head made of
  /// it (a client asking for the same range again, as `tools/bench`'s time to first byte does, gets it as it is).
  private struct Entry {
    var source: Source
    var template: HTTPResponseHead
    var last: (range: Range<Int64>, keepAlive: Bool, head: HTTPResponseHead)
  }

  init(loop: any EventLoop) {
    self.loop = loop
  }

  /// The head of a hit of `range` for `key`: the last one made, if it was made from `source` for the same
  /// range and connection handling; else `complete` of the head kept without the range's fields, if that was
  /// made from `source`; else `complete` of the one `make` returns, kept for next time.
  func head(
    for key: Key, range: Range<Int64>, keepAlive: Bool, from source: Source, make: () -> HTTPResponseHead,
    complete: (HTTPResponseHead) -> HTTPResponseHead
  ) -> HTTPResponseHead {
    loop.preconditionInEventLoop()
    if let kept = heads[key], kept.source == source {
      if kept.last.range == range, kept.last.keepAlive == keepAlive { return kept.last.head }
      let head = complete(kept.template)
      heads[key]!.last = (range, keepAlive, head)
      return head
    }
    let template = make()
    let head = complete(template)
    if heads.count >= Self.capacity, heads[key] == nil { heads.removeAll(keepingCapacity: true) }
    heads[key] = Entry(source: source, template: template, last: (range, keepAlive, head))
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
