import HTTPTypes
import MediaCache
import MediaCacheHTTP
import NIOCore
import Synchronization

// A hit answered at once (Step 10): a range the cache holds wholly is read and checked on the I/O executor
// thread the request's task runs on (`CachingReader.readCachedNow`), without a `CachedBytes` read, and leaves
// in one write with its head (docs/ARCHITECTURE.md, "A proxy hit").

extension ProxyResponder {
  /// The largest range answered at once from the cache (`readCachedNow`); longer bodies are streamed.
  static let immediateMaxBytes = 2 << 20

  /// The response to a range read at once from the cache: the same head as a streamed hit's, the body in one
  /// write (head, body and end), counted as a hit before it goes out. `hold` (its share of the bytes hits may
  /// have in flight) is given back once the body has reached the socket, or after `HitBudgetHold.longest`.
  func immediateResponse(_ hit: CachedRange, partial: Bool, hold: HitBudgetHold?) -> ProxyResponse {
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
      let timer = hold.map { hold in
        writer.eventLoop.scheduleTask(in: HitBudgetHold.longest) { hold.release() }
      }
      // Back to the pool once NIO has written it: reused while still queued, it would be copied on write.
      try await writer.write(hit.buffer, endingResponse: true) {
        timer?.cancel()
        hold?.release()
        reader.recycle($0)
      }
    }
    return ProxyResponse(status: partial ? .partialContent : .ok, headers: headers, body: body)
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

  /// Waits for the share a read of `bounds` may need (the range and a verification block beyond each end); nil
  /// when there is no bound.
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
