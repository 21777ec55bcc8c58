import HTTPTypes
import MediaCacheHTTP

// A hit answered at once (Step 10): a range the cache holds wholly is read and checked on the I/O executor
// thread the request's task runs on (`CachingReader.readCachedNow`), without a `CachedBytes` read, and leaves
// in one write with its head (docs/ARCHITECTURE.md, "A proxy hit").

extension ProxyResponder {
  /// The largest range answered at once from the cache (`readCachedNow`); longer bodies are streamed.
  static let immediateMaxBytes = 2 << 20

  /// The response to a range read at once from the cache: the same head as a streamed hit's, the body in one
  /// write (head, body and end), counted as a hit before it goes out.
  func immediateResponse(_ hit: CachedRange, partial: Bool) -> ProxyResponse {
    let count = Int64(hit.range.count)
    var headers = Self.headers(contentType: hit.contentType, etag: hit.etag, lastModified: hit.lastModified)
    Self.addBodyFields(
      &headers, first: hit.range.lowerBound, count: count, length: hit.length, partial: partial,
      ifRange: false)
    let metrics = self.metrics
    let reader = self.reader
    metrics.responseStarted()
    metrics.noteServed(fromCache: count, fromOrigin: 0)
    metrics.noteRequest(hit: true)
    let body = ProxyResponse.Body.stream { writer in
      defer { metrics.responseEnded() }
      // Back to the pool once NIO has written it: reused while still queued, it would be copied on write.
      try await writer.write(hit.buffer, endingResponse: true) { reader.recycle($0) }
    }
    return ProxyResponse(status: partial ? .partialContent : .ok, headers: headers, body: body)
  }
}
