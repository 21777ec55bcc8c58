import NIOCore
import Synchronization

/// A token bucket over the bytes of background origin responses (prefetch, `fetch --hls`, preloading): past
/// `bytesPerSecond` on average, with bursts of `burstBytes`, the next body part of a background response is
/// read later (`BodyWriter` delays the future AsyncHTTPClient waits for, so TCP slows the origin down).
/// Foreground responses (a player) are never delayed, and a background response is no longer delayed once a
/// player joins it.
final class BackgroundRateLimit: Sendable {
  let bytesPerSecond: Int64
  let burstBytes: Int64
  /// Tokens (bytes) left, negative while in debt, as of `updated` (uptime nanoseconds).
  private let bucket: Mutex<(tokens: Double, updated: UInt64)>

  /// A limit of `bytesPerSecond` (at least 1) with bursts of a quarter second's bytes, at least 64 KiB.
  init(bytesPerSecond: Int64) {
    precondition(bytesPerSecond > 0, "a rate limit needs a positive rate")
    self.bytesPerSecond = bytesPerSecond
    self.burstBytes = max(64 << 10, bytesPerSecond / 4)
    self.bucket = Mutex((Double(burstBytes), NIODeadline.now().uptimeNanoseconds))
  }

  /// Takes `count` bytes from the bucket and returns how long the reader of those bytes waits before it reads
  /// more (zero while the bucket holds enough). The bucket may go into debt: bytes already received are
  /// counted, and the wait pays the debt back.
  func delay(taking count: Int, now: UInt64 = NIODeadline.now().uptimeNanoseconds) -> TimeAmount {
    bucket.withLock { bucket in
      let elapsed = Double(now &- bucket.updated) / 1e9
      bucket.tokens = min(Double(burstBytes), bucket.tokens + elapsed * Double(bytesPerSecond))
      bucket.updated = now
      bucket.tokens -= Double(count)
      guard bucket.tokens < 0 else { return .zero }
      return .nanoseconds(Int64(-bucket.tokens / Double(bytesPerSecond) * 1e9))
    }
  }
}
