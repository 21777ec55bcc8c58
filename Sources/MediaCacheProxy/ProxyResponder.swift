import Foundation
import HTTPTypes
import Logging
import MediaCache
import MediaCacheHTTP
import MediaCacheStreaming
import NIOCore

/// Answers one proxied request: checks the URL, reads through the cache, and streams the body with the
/// client's pace setting the pace of the reads (NIO's writer suspends while the socket is full).
struct ProxyResponder: Sendable {
  let server: ProxyServer
  /// Live playlists and MPDs seen lately, dropped from the cache before they are read again.
  let live = LiveManifests()
  var reader: CachingReader { server.reader }
  var metrics: ProxyMetrics { server.metrics }

  func respond(to request: ProxyRequest) async throws -> ProxyResponse {
    let response: ProxyResponse
    do {
      response = try await handle(request)
    } catch let refusal as Refusal {
      response = refusal.response
    }
    metrics.noteStatus(response.status.code)
    return response
  }

  private func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
    if let problem = request.hostProblem { throw Refusal(.badRequest, problem) }
    if server.upstreamMap == nil {
      if let response = try await ownEndpoint(request) { return response }
    } else if Upstream.isAdminPath(request.path) {
      // The reverse-proxy mode: the proxy's own endpoints are under the admin prefix, every other path is an
      // upstream's.
      guard request.path.hasPrefix(ProxyServer.adminPrefix) else {
        var redirect = Refusal(.permanentRedirect, "the proxy's own pages are at \(ProxyServer.adminPrefix)")
        redirect.headers[.location] = ProxyServer.adminPrefix
        throw redirect
      }
      var own = request
      own.path = "/" + request.path.dropFirst(ProxyServer.adminPrefix.count)
      if let response = try await ownEndpoint(own) { return response }
      throw Refusal(.notFound, "the proxy has no such endpoint")
    }
    let (origin, isPathForm, rangeHeader, requested) = try target(of: request)
    if live.contains(origin) {
      // A live playlist or MPD: the cached copy is stale, the player must see the origin's current one.
      _ = try? await reader.cache.remove(origin)
    }
    let isHead = request.method == .HEAD
    if server.passMemo.contains(origin) {
      return try await passThrough(request, origin: origin, isPathForm: isPathForm)
    }

    // Only a range the cache holds now waits for its share of the hits' budget: a miss never waits behind hits.
    if !isHead, request.headers[.ifRange] == nil, !ConditionalRequest.isConditional(request.headers),
      let bounds = reader.cachedBoundsNow(
        origin, objectID: request.resolvedTarget?.objectID, range: requested, maxBytes: Self.immediateMaxBytes
      )
    {
      let hold = await HitBudgetHold.acquire(server.hitBudget, for: bounds)
      if let hit = reader.readCachedNow(
        origin, objectID: request.resolvedTarget?.objectID, range: requested,
        maxBytes: Self.immediateMaxBytes,
        declining: { Self.mayBePlaylist(contentType: $0, url: origin) })
      {
        return immediateResponse(hit, partial: requested != .all, hold: hold)
      }
      hold?.release()
    }
    return try await respondThroughCache(
      request, origin: origin, isPathForm: isPathForm, rangeHeader: rangeHeader, requested: requested)
  }

  /// How many times a read is opened again when the object moves to another version between the response's
  /// head being made and its first piece.
  static let maxReopens = 3

  /// Answers `request` with a read through the cache of `requested` bytes of `origin`.
  ///
  /// The head is made from the version the read reports; the first piece is read before the status goes out.
  /// When the object moves to another version in between (another process imported or removed it, or the
  /// origin's changed: `OriginError.objectChanged`), nothing went out yet, so the read is opened again (up to
  /// `maxReopens` times) rather than answered with a 502 (found by tools/torture's many-processes class).
  private func respondThroughCache(
    _ request: ProxyRequest, origin: String, isPathForm: Bool, rangeHeader: RangeHeader,
    requested: RequestedRange, reopened: Int = 0, after failed: CachedBytes? = nil
  ) async throws -> ProxyResponse {
    let isHead = request.method == .HEAD
    var bytes: CachedBytes
    do {
      // Begun again after its object changed (`failed`), the response counts what its first read's flight
      // brought of the new version as fetched (`BytesAtHand`).
      bytes = try await reader.read(origin, range: requested, after: failed)
    } catch let error as OriginError where Self.isRelayed(error) {
      return try await relay(request, error, origin: origin, isPathForm: isPathForm)
    } catch {
      throw refusal(for: error, url: origin)
    }
    var partial = requested != .all
    if partial, let ifRange = request.headers[.ifRange],
      !Self.ifRangeMatches(ifRange, etag: bytes.etag, lastModified: bytes.lastModified)
    {
      // The client's copy is of another version: it gets the whole current one.
      bytes.close()
      bytes = try await read(origin, .all, after: bytes)
      partial = false
    }
    if partial, bytes.length == nil, !requested.isBounded {
      // The origin gives no length, so an open range cannot be described in a Content-Range: send it all.
      bytes.close()
      bytes = try await read(origin, .all, after: bytes)
      partial = false
    }
    let count = bytes.count
    let use = CacheUse(cachedAtOpen: bytes.cachedBytesAtOpen, count: count)
    if Self.mayBePlaylist(contentType: bytes.contentType, url: origin) {
      bytes.close()
      // The rewritten text has no entity tag: only `If-Match: *` and `If-Unmodified-Since` can hold.
      if ConditionalRequest.preconditionFails(request.headers, etag: nil, lastModified: bytes.lastModified) {
        throw Refusal.preconditionFailed
      }
      return try await respondWithPlaylist(
        origin, isPathForm: isPathForm, rangeHeader: partial ? rangeHeader : .none, isHead: isHead, use: use,
        revalidation: bytes.revalidation, after: bytes)
    }

    if ConditionalRequest.preconditionFails(
      request.headers, etag: bytes.etag, lastModified: bytes.lastModified)
    {
      bytes.close()
      throw Refusal.preconditionFailed
    }
    if ConditionalRequest.notModified(request.headers, etag: bytes.etag, lastModified: bytes.lastModified) {
      bytes.close()
      return notModified(bytes, use: use)
    }

    var headers = Self.headers(
      contentType: bytes.contentType, etag: bytes.etag, lastModified: bytes.lastModified,
      stored: bytes.storedHeaders, freshness: bytes.freshness,
      cacheStatus: cacheStatus(use, bytes.revalidation, bytes.freshness), via: via)
    Self.addBodyFields(
      &headers, first: bytes.range.lowerBound, count: count, length: bytes.length, partial: partial,
      ifRange: request.headers[.ifRange] != nil)
    let status: HTTPResponse.Status = partial ? .partialContent : .ok
    if isHead {
      bytes.close()
      return ProxyResponse(status: status, headers: headers, body: .empty)
    }

    // The first piece is read before the status goes out, so a failing origin becomes a status code.
    var iterator = bytes.makeAsyncIterator()
    let first: CachedPiece?
    do {
      // Sized and counted by the server's bound, and counted from here until the body's writer has it
      // (`PieceSource`): 256 players opening at once each hold their first piece until their heads go out.
      first = try await iterator.nextOwnedPiece(sizing: server.queuedBytes)
    } catch let error as OriginError where error.code == .objectChanged && reopened < Self.maxReopens {
      bytes.close()
      metrics.noteReopenedRead()
      return try await respondThroughCache(
        request, origin: origin, isPathForm: isPathForm, rangeHeader: rangeHeader, requested: requested,
        reopened: reopened + 1, after: bytes)
    } catch let error as OriginError where Self.isRelayed(error) {
      // Found out by the first missing range's response (the length was known): relayed, as above.
      bytes.close()
      return try await relay(request, error, origin: origin, isPathForm: isPathForm)
    } catch {
      bytes.close()
      throw refusal(for: error, url: origin)
    }
    let pieces = PieceSource(iterator, first: first, queued: server.queuedBytes)
    let metrics = self.metrics
    let reader = self.reader
    let streamed = bytes
    let record = AccessRecord()
    metrics.responseStarted()
    let body = ProxyResponse.Body.stream { writer in
      let accounting = BodyAccounting(bytes: streamed, metrics: metrics, record: record)
      defer {
        streamed.close()
        metrics.responseEnded()
      }
      do {
        // The counters are updated before each piece goes out, and marked final before the last one, so a
        // client that reads /metrics right after the body sees this response counted. The last piece is
        // known by the byte count (a body of unknown length is marked final after its last piece).
        // Bytes from the origin go out in the response's own buffers, and bytes from the cache in the buffer
        // they were read and CRC-checked in (no copy either way), which goes back to the reader's pool once NIO
        // has written it. The next piece is asked for once the writer has taken this one (a piece holds no share of
        // the read budget once it is here: `nextOwnedPiece`). A one-piece response (a range of at most a chunk from the cache)
        // leaves as one write: head, body and end.
        // Each piece is handed over whole (`consume`): while its write waits for the socket, nothing here holds
        // it, so its buffer is the pool's alone once NIO is done (held, the pool's next read into it would copy
        // it to a new allocation).
        var remaining = count
        var current = pieces.takeFirst()
        while let piece = current.take() {
          let size = Int64(piece.count)
          remaining = remaining.map { $0 - size }
          let isLast = remaining.map { $0 <= 0 } ?? false
          accounting.update(finished: isLast)
          try await writer.write(consume piece, endingResponse: isLast) { reader.recycle($0) }
          if !isLast { current = try await pieces.next(sizing: writer.queued) }
        }
        // The read is taken to its end (a nil) even after the last piece: a range that ends inside a chunk
        // leaves the flight to finish that chunk, so it is cached (dropping the read would cancel the flight).
        _ = try? await pieces.next()
        accounting.update(finished: true)
        if let remaining, remaining > 0 {
          // Fewer bytes than the Content-Length sent: the connection must be cut, not kept for a next request.
          throw ShortBody(missing: remaining)
        }
      } catch let error as OriginError {
        // Too late for a status code: the connection is cut, so the player sees a short body.
        metrics.noteOriginError()
        throw error
      }
    }
    return ProxyResponse(status: status, headers: headers, body: body, access: record)
  }

  /// Adds a body's `Content-Length` (when `count` is known) and, for a 206, its `Content-Range`. A 206 to
  /// If-Range completes a copy the client holds: only the fields of RFC 9110 §15.3.7 are sent, not the other
  /// representation fields it already has.
  static func addBodyFields(
    _ headers: inout HTTPFields, first: Int64, count: Int64?, length: Int64?, partial: Bool, ifRange: Bool
  ) {
    if let count { headers[.contentLength] = "\(count)" }
    guard partial else { return }
    if ifRange {
      headers[.contentType] = nil
      headers[.lastModified] = nil
    }
    headers[.contentRange] = contentRange(first: first, count: count ?? 1, length: length)
  }

  /// The value of `Content-Range` for `count` bytes from `first` of an object of `length` (nil: unknown).
  static func contentRange(first: Int64, count: Int64, length: Int64?) -> String {
    // One allocation (the interpolation grew its string twice for a typical value, measured per hit).
    var value = "bytes "
    value.reserveCapacity(64)
    value += String(first)
    value += "-"
    value += String(first + count - 1)
    value += "/"
    value += length.map { String($0) } ?? "*"
    return value
  }

  func read(_ origin: String, _ range: RequestedRange, after earlier: CachedBytes? = nil) async throws
    -> CachedBytes
  {
    do {
      return try await reader.read(origin, range: range, after: earlier)
    } catch {
      throw refusal(for: error, url: origin)
    }
  }

  static func respondFromMemory(_ body: Data, rangeHeader: RangeHeader, isHead: Bool, headers: HTTPFields)
    -> ProxyResponse
  {
    var headers = headers
    var slice = body[...]
    var status = HTTPResponse.Status.ok
    if case .single(let requested) = rangeHeader {
      guard let range = requested.resolved(length: Int64(body.count)) else {
        var refusal = Refusal(.rangeNotSatisfiable, "range not satisfiable")
        refusal.headers[.contentRange] = "bytes */\(body.count)"
        return refusal.response
      }
      slice = body[(body.startIndex + Int(range.lowerBound))..<(body.startIndex + Int(range.upperBound))]
      status = .partialContent
      headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(body.count)"
    }
    headers[.contentLength] = "\(slice.count)"
    let responseBody: ProxyResponse.Body = isHead ? .empty : .bytes(ByteBuffer(bytes: slice))
    return ProxyResponse(status: status, headers: headers, body: responseBody)
  }
}

/// A body that ended before the length its head announced.
struct ShortBody: Error {
  var missing: Int64
}

/// The iterator of one response body and its first piece (read before the status went out), moved into the
/// body-writing task (only that task uses it). The first piece is held here, not by the body's closure, so
/// that it is let go once written instead of at the end of the response. It counts in the server's
/// `QueuedBytes` until taken, or until the response is dropped unsent.
final class PieceSource: @unchecked Sendable {
  private var iterator: CachedBytes.Iterator
  private var first: CachedPiece?
  private var counted: Int
  private let queued: QueuedBytes
  init(_ iterator: CachedBytes.Iterator, first: CachedPiece?, queued: QueuedBytes) {
    self.iterator = iterator
    self.counted = first?.count ?? 0
    self.first = first
    self.queued = queued
    queued.add(counted)
  }
  deinit { queued.remove(counted) }
  /// The first piece, once (nil after); the writer counts it from here.
  func takeFirst() -> CachedPiece? {
    queued.remove(counted)
    counted = 0
    return first.take()
  }
  func next(sizing: (any PieceSizing)? = nil) async throws -> CachedPiece? {
    try await iterator.nextOwnedPiece(sizing: sizing)
  }
}

extension RequestedRange {
  var isBounded: Bool {
    if case .bounded = self { return true }
    return false
  }
}

extension HTTPField.Name {
  static var xContentTypeOptions: Self { Self("X-Content-Type-Options")! }
}
