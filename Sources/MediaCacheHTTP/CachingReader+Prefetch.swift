import Foundation
import MediaCache

// Prefetch: filling a range in the background, with progress.
extension CachingReader {
  /// Fills `range` of the object (the whole object by default), skipping what is cached, and reports
  /// progress. Cancel the consuming task to stop; a later prefetch resumes where it stopped. Prefetch is
  /// background work: at most `maxBackgroundRequestsPerHost` requests per origin host, yielding to players.
  ///
  /// Progress is sampled every 200 ms and once at the end. Samples do not queue up behind a consumer slower
  /// than that: it gets the newest (the last one always), so what it reads is the state of a moment ago, never
  /// a backlog of older states, and the stream holds one sample however long the prefetch runs.
  public func prefetch(_ url: String, range: RequestedRange = .all) -> AsyncThrowingStream<
    PrefetchProgress, any Error
  > {
    let (stream, continuation) = AsyncThrowingStream.makeStream(
      of: PrefetchProgress.self, bufferingPolicy: .bufferingNewest(1))
    let task = Task {
      do {
        let bytes = try await read(url, range: range, priority: .background)
        defer { bytes.close() }
        let started = Date()
        // As of the open: the flight `read` started to learn the length may have written bytes since.
        let cachedAtStart = bytes.cachedBytesAtOpen
        // Progress is sampled while the flights run; no byte passes through this task.
        let reporter = Task {
          while !Task.isCancelled {
            let fetched = max(0, bytes.cachedBytes - cachedAtStart)
            continuation.yield(bytes.progress(fetched: fetched, since: started))
            try? await Task.sleep(for: .milliseconds(200))
          }
        }
        defer { reporter.cancel() }
        try await bytes.fillMissing()
        // The sampler stops before the last report, which no stale sample may follow.
        reporter.cancel()
        await reporter.value
        let fetched = max(0, bytes.cachedBytes - cachedAtStart)
        await bytes.closeAndCommit()
        continuation.yield(bytes.progress(fetched: fetched, since: started))
        continuation.finish()
      } catch {
        continuation.finish(throwing: error)
      }
    }
    continuation.onTermination = { _ in task.cancel() }
    return stream
  }

  /// `prefetch(_:range:)` for a `URL`.
  public func prefetch(_ url: URL, range: RequestedRange = .all) -> AsyncThrowingStream<
    PrefetchProgress, any Error
  > {
    prefetch(url.absoluteString, range: range)
  }
}

/// Progress of a prefetch.
public struct PrefetchProgress: Sendable, Equatable {
  /// Bytes of the range now cached.
  public var cachedBytes: Int64
  /// Bytes in the range.
  public var totalBytes: Int64
  /// Bytes fetched from the origin by this prefetch.
  public var fetchedBytes: Int64
  /// Origin throughput of this prefetch so far.
  public var bytesPerSecond: Double
  /// The bytes of the range cached since the prefetch began (by it, or by another read of the object
  /// meanwhile), as sorted ranges.
  public var fetchedRanges: [Range<Int64>] = []

  /// Whether every byte of the range is cached.
  public var isComplete: Bool { cachedBytes >= totalBytes }
}
