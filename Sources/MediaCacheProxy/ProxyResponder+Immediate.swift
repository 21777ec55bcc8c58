import HTTPTypes
import MediaCache
import MediaCacheHTTP
import NIOCore
import NIOHTTP1
import Synchronization

// A hit answered at once (Step 10): a range the cache holds wholly is read and checked in one buffer, without
// a `CachedBytes` read, and leaves in one write with its head (docs/ARCHITECTURE.md, "A proxy hit"). Where its
// pages are in memory it is answered on the connection's event loop as the request arrives (`hitNow`, no
// task and no hop between threads: the read there is one that cannot wait for the disk); else on the I/O
// executor thread the request's task runs on (`CachingReader.readCachedNow`).

extension ProxyResponder {
  /// The largest range answered at once from the cache (`readCachedNow`); longer bodies are streamed.
  static let immediateMaxBytes = 2 << 20

  /// The hit `request` is if it can be answered now, on the calling thread, without any blocking call (meant
  /// for the connection's event loop): a GET without If-Range of a proxied URL whose range (at most
  /// `immediateMaxBytes`) the cache holds in complete chunks of an object open now, every byte of which is in
  /// the page cache and passes its CRC, and not a playlist. A hit returned is counted as started; the caller
  /// writes it, then counts it (`countLoopHit`, once the response is handed to NIO), and ends it
  /// (`HitBody.sent`). Nil for anything else,
  /// with nothing changed: `respond(to:)` then answers it (refusals included; a corrupt chunk is dropped there).
  ///
  /// Such a hit takes no share of the hits' budget (`ProxyServer.Configuration.hitBytesInFlight`): its read
  /// runs on the loop that writes it, just before the write, so reads cannot run ahead of the loops, and a
  /// connection has one response in flight at a time. The budget bounds the hits read on the I/O executor.
  ///
  /// The request's target is the one the loop resolved (`request.resolvedTarget`, from `resolvedTarget` with
  /// `targets`, the loop's): a request without one is not answered here. A target seen before skips the parse
  /// and check of its URL and the hash of its key.
  func hitNow(_ request: ProxyRequest, targets: LoopTargetMemo) -> LoopHit? {
    // (`resolvedTarget` is nil for the proxy's own endpoints and for targets it refuses.)
    guard request.method == .GET, request.hostProblem == nil, request.headers[.ifRange] == nil,
      !ConditionalRequest.isConditional(request.headers), let target = request.resolvedTarget
    else { return nil }
    let requested = RangeHeader(request.headers[.range]).requested
    return hitNow(target, requested, uri: request.uri, targets: targets)
  }

  /// `hitNow` for a GET whose target the loop remembers, decided from NIO's head as it came: no
  /// `ProxyRequest` is made (every field copied and checked) and no field is looked for more than once, which
  /// is most of what a loop does for a hit before its read (docs/PERFORMANCE.md). The same decisions as
  /// `hitNow(_:targets:)`: `.answered` with the hit, counted as started; `.declined` where that would return nil too (a
  /// conditional or `If-Range`, or what the cache holds cannot be given now), so the caller need not ask it;
  /// `.undecided` for what this does not decide (another method, a target not remembered, `Range` sent more
  /// than once or with spaces around its value, `Host` missing or repeated), where the caller goes on as
  /// without it.
  func hitNow(_ head: HTTPRequestHead, targets: LoopTargetMemo) -> LoopHitAttempt {
    guard head.method == .GET, let known = targets.target(for: head.uri) else { return .undecided }
    var range: String?
    var hosts = 0
    for (name, value) in head.headers {
      switch LoopHitField(name) {
      case .host?: hosts += 1
      case .range?:
        // `HTTPField` trims spaces and tabs around a value, and NIO's parser keeps those after it: left to the
        // whole request's path (as is `Range` sent twice).
        guard range == nil, value.utf8.first.map(Self.isSpaceOrTab) != true,
          value.utf8.last.map(Self.isSpaceOrTab) != true
        else { return .undecided }
        range = value
      case .declining?: return .declined
      case nil: continue
      }
    }
    // A request whose `Host` fields make it a bad one is refused by the whole request's path.
    guard hosts == 1 || (head.version.major == 1 && head.version.minor == 0 && hosts == 0) else {
      return .undecided
    }
    let requested = RangeHeader(range).requested
    guard let hit = hitNow(known, requested, uri: head.uri, targets: targets) else { return .declined }
    return .answered(hit)
  }

  private static func isSpaceOrTab(_ byte: UInt8) -> Bool {
    byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
  }

  /// The hit of `requested` of the object `target` names, read now on the calling loop and counted as started
  /// (the rest of its counts follow its write: `countLoopHit`), `target`
  /// remembered for `uri` with the content type it was answered with; nil when the cache cannot give it now.
  private func hitNow(
    _ target: LoopTargetMemo.Target, _ requested: RequestedRange, uri: String, targets: LoopTargetMemo
  ) -> LoopHit? {
    let origin = target.origin
    let answered = target.answered
    guard !live.contains(origin),
      let cached = reader.readCachedNow(
        origin, objectID: target.objectID, range: requested, maxBytes: Self.immediateMaxBytes,
        waitingForDisk: false, counting: false,
        declining: { answered != .init(value: $0) && Self.mayBePlaylist(contentType: $0, url: origin) })
    else { return nil }
    if answered != .init(value: cached.contentType) {
      var remembered = target
      remembered.answered = .init(value: cached.contentType)
      targets.remember(remembered, for: uri)
    }
    metrics.responseStarted()
    return LoopHit(cached: cached, partial: requested != .all)
  }

  /// Counts a hit a loop answered (`hitNow`), once its response is handed to NIO, in the same turn of
  /// the loop: served, its status, answered on a loop, and the cache's read. Counting after the write keeps
  /// this work out of the hit's time to first byte (~0.025 ms of ~0.65, docs/PERFORMANCE.md);
  /// `ProxyMetrics.countsSettled()` waits for the loops' turns, so `/metrics` and the dashboard count every
  /// loop hit whose first byte a client has.
  func countLoopHit(_ hit: LoopHit) {
    let cached = hit.cached
    CachingReader.countCachedRead(cached.range.count)
    noteServed(cached)
    metrics.noteStatus(hit.status.code)
    metrics.noteHitOnLoop()
  }

  /// What the target of a GET or HEAD names, on the event loop whose `targets` these are: as they remember it,
  /// else checked by `target(of:)` and remembered, so that the loop's next request of the target, hit or not,
  /// neither parses and checks its origin URL nor hashes its key (nor does the task answering it, which gets
  /// it in `ProxyRequest.resolvedTarget`). Nil for another method, one of the proxy's own endpoints and a
  /// target the proxy refuses (`target(of:)` says why, in the task).
  func resolvedTarget(of request: ProxyRequest, in targets: LoopTargetMemo) -> LoopTargetMemo.Target? {
    guard request.method == .GET || request.method == .HEAD,
      server.upstreamMap == nil ? !Self.isOwnEndpoint(request) : !Upstream.isAdminPath(request.path)
    else { return nil }
    return targets.target(for: request.uri) {
      guard let (origin, _, _, _) = try? target(of: request) else { return nil }
      return .init(origin: origin, objectID: reader.cache.objectID(for: origin))
    }
  }

  /// The response to a range read at once from the cache: the same head as a streamed hit's, the body in one
  /// write (head, body and end), counted as a hit before it goes out. `hold` (its share of the bytes hits may
  /// have in flight) is given back once the body has reached the socket, or after `HitBudgetHold.longest`.
  func immediateResponse(_ hit: CachedRange, partial: Bool, hold: HitBudgetHold?) -> ProxyResponse {
    noteHit(hit)
    let body = HitBody(buffer: hit.buffer, hold: hold, reader: reader, metrics: metrics)
    return ProxyResponse(
      status: partial ? .partialContent : .ok, headers: hitHeaders(hit, partial: partial), body: .hit(body),
      access: AccessRecord(hit))
  }

  /// The fields of a hit's response: the same as a streamed hit's.
  func hitHeaders(_ hit: CachedRange, partial: Bool) -> HTTPFields {
    var headers = hitHeadersBeforeBody(hit)
    Self.addBodyFields(
      &headers, first: hit.range.lowerBound, count: Int64(hit.range.count), length: hit.length,
      partial: partial, ifRange: false)
    return headers
  }

  /// The fields of a hit's response that do not depend on its range, in their order: `hitHeaders` without
  /// the body's two (`Content-Length`, `Content-Range`), which `addBodyFields` appends after them.
  func hitHeadersBeforeBody(_ hit: CachedRange) -> HTTPFields {
    Self.headers(
      contentType: hit.contentType, etag: hit.etag, lastModified: hit.lastModified,
      stored: hit.storedHeaders, freshness: hit.freshness,
      cacheStatus: cacheStatus(.hit, .notNeeded, hit.freshness), via: via)
  }

  /// Counts a hit read at once as started and served, before its body goes out (`HitBody.sent` ends it).
  private func noteHit(_ hit: CachedRange) {
    metrics.responseStarted()
    noteServed(hit)
  }

  /// Counts a hit read at once as served: its bytes, its object's range (for the preload ledger), a hit.
  private func noteServed(_ hit: CachedRange) {
    let count = Int64(hit.range.count)
    metrics.noteServed(fromCache: count, fromOrigin: 0)
    metrics.noteServed(hit.objectID, hit.range)
    metrics.noteRequest(hit: true)
  }
}

/// What `ProxyResponder.hitNow(_:targets:)` made of a request's head.
enum LoopHitAttempt {
  /// The hit, read and counted as started: the loop writes it, then counts it (`countLoopHit`).
  case answered(LoopHit)
  /// Not a hit the loop can answer now (`hitNow` with the whole request would say the same).
  case declined
  /// Not decided from the head alone.
  case undecided
}

/// The request fields a loop hit looks at, by name as sent (ASCII case ignored): `Range`, and those that make
/// `hitNow` decline (`If-Range`, and the conditionals `ConditionalRequest.isConditional` names).
private enum LoopHitField {
  /// `Range`.
  case range
  /// `Host`.
  case host
  /// `If-Range`, `If-None-Match`, `If-Modified-Since`, `If-Match` or `If-Unmodified-Since`: a loop does not
  /// answer the request.
  case declining

  /// The field `name` is, or nil for any other.
  init?(_ name: String) {
    var name = name
    let found: LoopHitField? = name.withUTF8 { bytes in
      switch bytes.count {
      case 4: Self.matches(bytes, "host") ? .host : nil
      case 5: Self.matches(bytes, "range") ? .range : nil
      case 8: Self.matches(bytes, "if-range") || Self.matches(bytes, "if-match") ? .declining : nil
      case 13: Self.matches(bytes, "if-none-match") ? .declining : nil
      case 17: Self.matches(bytes, "if-modified-since") ? .declining : nil
      case 19: Self.matches(bytes, "if-unmodified-since") ? .declining : nil
      default: nil
      }
    }
    guard let found else { return nil }
    self = found
  }

  /// Whether `bytes` spell `lowercase` (of the same length) with ASCII case ignored.
  private static func matches(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercase: StaticString) -> Bool {
    lowercase.withUTF8Buffer { expected in
      zip(bytes, expected).allSatisfy { byte, want in
        byte == want || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") && byte | 0x20 == want)
      }
    }
  }
}

/// A hit a loop answers at once (`ProxyResponder.hitNow`): its bytes, read and checked, and whether it answers
/// a `Range` (206) or not (200). Counted as started; its connection writes it, with its range's fields added to
/// the head `LoopHitHeads` keeps or `ProxyResponder.hitHeadersBeforeBody` makes
/// (`ProxyConnectionHandler.hitHead`), then counts it as served (`ProxyResponder.countLoopHit`).
struct LoopHit {
  let cached: CachedRange
  let partial: Bool

  var status: HTTPResponse.Status { partial ? .partialContent : .ok }
}

extension AccessRecord {
  /// The record of a hit read at once: every byte from the cache.
  convenience init(_ hit: CachedRange) {
    self.init()
    note(hit.objectID, fromCache: Int64(hit.range.count), fromOrigin: 0)
  }
}

/// The body of a hit answered at once: one buffer, read and checked, sent with the end of the response.
struct HitBody: Sendable {
  let buffer: ByteBuffer
  let hold: HitBudgetHold?
  let reader: CachingReader
  let metrics: ProxyMetrics

  /// Hands the buffer and the end of the response to `writer` without waiting. Once NIO is done with the
  /// buffer it goes back to the reader's pool (reused while still held, it would be copied on write), the
  /// hold is given back, and the response counted as ended; the hold is given back after
  /// `HitBudgetHold.longest` in any case.
  func send(through writer: ProxyBodyWriter) {
    let timer = hold.map { hold in
      writer.eventLoop.scheduleTask(in: HitBudgetHold.longest) { hold.release() }
    }
    // The closure gets the buffer back as its argument: it holds none itself.
    writer.writeNow(buffer, endingResponse: true) { [hold, reader, metrics] buffer in
      timer?.cancel()
      Self.sent(buffer, hold: hold, reader: reader, metrics: metrics)
    }
  }

  /// What follows once NIO is done with `buffer` (written to the socket, or dropped with the connection): the
  /// buffer goes back to the reader's pool, the hold (if any) is given back, and the response counts as ended.
  /// For a caller that writes the buffer itself too (a hit answered on its event loop, which holds no share).
  static func sent(
    _ buffer: consuming ByteBuffer, hold: HitBudgetHold?, reader: CachingReader, metrics: ProxyMetrics
  ) {
    hold?.release()
    reader.recycle(buffer)
    metrics.responseEnded()
  }
}

/// A hit's share of `ProxyServer.Configuration.hitBytesInFlight`, given back once.
final class HitBudgetHold: Sendable {
  private let budget: ReadBudget
  private let bytes: Atomic<Int64>
  /// The longest a hit keeps its share once its body was handed to NIO: a client that does not read gives it
  /// up then (its bytes stay queued for it, outside the bound).
  static let longest = TimeAmount.milliseconds(250)

  private init(budget: ReadBudget, bytes: Int64) {
    self.budget = budget
    self.bytes = Atomic(bytes)
  }

  /// Waits for the share a read of `bounds` may need (the range and 64 KiB beyond each end, room for the
  /// verification blocks that hold its ends); nil when there is no bound.
  static func acquire(_ budget: ReadBudget?, for bounds: Range<Int64>) async -> HitBudgetHold? {
    guard let budget else { return nil }
    return HitBudgetHold(budget: budget, bytes: await budget.acquire(Int64(bounds.count) + (128 << 10)))
  }

  /// Gives the share back (the first call does).
  func release() {
    let held = bytes.exchange(0, ordering: .acquiringAndReleasing)
    if held > 0 { budget.release(held) }
  }
}

extension ProxyResponder {
  /// The request's fields named in `ProxyServer.Configuration.forwardedHeaderNames` (a field that cannot be
  /// sent is left out).
  func forwardedHeaders(of request: ProxyRequest) -> [OriginHeader] {
    let names = server.configuration.forwardedHeaderNames
    guard !names.isEmpty else { return [] }
    return request.headers.compactMap { field in
      guard names.contains(field.name.canonicalName) else { return nil }
      return try? OriginHeader(name: field.name.rawName, value: field.value)
    }
  }
}
