import AsyncHTTPClient
import NIOCore

/// The rest of a read's range from the origin, under the strong entity tag of the version the read delivers,
/// after another writer replaced the object mid-read (a whole `mediacache import`, another process's fetch
/// that found a new version). Asked with `If-Range` and not stored (the cache holds the other version now): a
/// `206` under the same strong tag is the same bytes (RFC 9110 §8.8.3), anything else ends the read with
/// `OriginError.objectChanged`. Found by tools/torture's many-processes class: the proxy cut a response after
/// its first 48 KiB when another process imported the object whole.
struct OriginTail {
  /// What the read delivered its bytes under: the version's strong entity tag and total length.
  struct Pinned: Equatable {
    var etag: String
    var length: Int64

    /// The pin of a version with a strong entity tag and a known length; nil otherwise (its bytes cannot be
    /// asked for again by validator).
    init?(etag: String?, length: Int64?) {
      guard let etag, !etag.hasPrefix("W/"), let length else { return nil }
      self.etag = etag
      self.length = length
    }
  }

  private var body: HTTPClientResponse.Body.AsyncIterator
  private let url: String
  /// The next byte the body holds, and the end of the range asked for.
  private(set) var position: Int64
  let end: Int64
  private let started = ContinuousClock.now

  /// Asks the origin for `position..<end` of `url` if it still has `pinned`'s version.
  static func open(_ url: String, _ range: Range<Int64>, pinned: Pinned, client: OriginClient) async throws
    -> OriginTail
  {
    let started = ContinuousClock.now
    let response: OriginResponse
    do {
      response = try await client.get(
        url, start: range.lowerBound, end: range.upperBound, ifRange: pinned.etag)
    } catch {
      ReaderMetrics.noteRequest(duration: .now - started, error: error)
      throw error
    }
    guard response.isPartial, response.start == range.lowerBound, response.metadata.etag == pinned.etag,
      response.metadata.length == pinned.length
    else {
      let found = response.metadata.etag ?? "no entity tag"
      let error = OriginError.objectChanged(
        url: url,
        cause: "replaced in the cache mid-read, and the origin no longer has \(pinned.etag) (it answered "
          + "\(response.isPartial ? "206" : "200") with \(found))")
      ReaderMetrics.noteRequest(duration: .now - started, error: error)
      throw error
    }
    ReaderMetrics.noteContinuedFromOrigin()
    return OriginTail(
      body: response.body.makeAsyncIterator(), url: url, position: range.lowerBound, end: range.upperBound)
  }

  private init(body: HTTPClientResponse.Body.AsyncIterator, url: String, position: Int64, end: Int64) {
    self.body = body
    self.url = url
    self.position = position
    self.end = end
  }

  /// The body's next bytes, cut at the end of the range; nil at the end. A body that ends short is
  /// `OriginError.truncatedBody`.
  mutating func next() async throws -> ByteBuffer? {
    guard position < end else { return nil }
    let piece: ByteBuffer?
    do {
      piece = try await body.next()
    } catch {
      let mapped = OriginClient.map(error, url: url)
      ReaderMetrics.noteRequest(duration: .now - started, error: mapped)
      throw mapped
    }
    guard var piece else {
      let error = OriginError.truncatedBody(url: url, expected: end, received: position, attempts: 1)
      ReaderMetrics.noteRequest(duration: .now - started, error: error)
      throw error
    }
    let take = Int(min(Int64(piece.readableBytes), end - position))
    if take < piece.readableBytes { piece = piece.getSlice(at: piece.readerIndex, length: take)! }
    position += Int64(take)
    ReaderMetrics.noteFetched(take)
    if position == end { ReaderMetrics.noteRequest(duration: .now - started, error: nil) }
    return piece
  }
}
