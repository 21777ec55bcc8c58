import Foundation
import Logging
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Synchronization
import SystemPackage
import Testing

@testable import MediaCacheHTTP

/// The lines a `CapturingLogHandler` was given.
final class CapturedLog: Sendable {
  let lines = Mutex<[String]>([])
  var all: [String] { lines.withLock { $0 } }
}

/// A swift-log handler that keeps each line (level and message) for a test to read.
struct CapturingLogHandler: LogHandler {
  let log: CapturedLog
  var metadata: Logger.Metadata = [:]
  var logLevel: Logger.Level = .trace

  subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  func log(event: LogEvent) {
    log.lines.withLock { $0.append("\(event.level) \(event.message) \(event.metadata ?? [:])") }
  }
}

/// How the read engine commits an object in the background.
@Suite struct SessionCommitTests {
  /// Found by tools/soak: "committing a cached object failed; its last chunks will be fetched again … the data
  /// manager of … is closed", at error level, dozens of times a minute, on a healthy cache. A reader's flush and
  /// its flight's close are both handed to the I/O executor, whose threads may run the close first; that close
  /// committed everything, so the flush finding the manager closed is no failure.
  @Test func aFlushOfAManagerClosedMeanwhileIsNoFailure() async throws {
    try await withTemporaryDirectory { directory in
      let log = CapturedLog()
      let cache = try MediaCache(configuration: .init(directory: FilePath("\(directory)/cache")))
      let reader = CachingReader(
        cache: cache,
        backgroundActivityLogger: Logger(label: "test", factory: { _ in CapturingLogHandler(log: log) }))
      let session = try await reader.registry.openSession(
        "http://127.0.0.1:9/closed-first.mp4", environment: reader.environment)
      try session.manager.close()
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        reader.registry.commitInBackground(session, closing: false) { continuation.resume() }
      }
      #expect(log.all.isEmpty, "\(log.all)")
    }
  }

  /// A read can end before its flight does (a player that drops its connection leaves the flight a grace and
  /// a read-ahead; a range ending inside a chunk leaves it to finish that chunk): the object's close, and its
  /// commit, begin only when the flight ends. A process exiting after its reads (`mediacache proxy` after a
  /// signal, `fetch`) finishes the reader first: the flight is cancelled, and what it fetched is committed
  /// before `finishOpenObjects` returns. (Found when `ProxyProcessTests` saw a proxy stopped right after its
  /// response exit with the object not complete.)
  @Test func finishingAReaderCancelsAFlightStillRunningAndCommitsWhatItFetched() async throws {
    try await withTemporaryDirectory { directory in
      let origin = try await TestOrigin.start()
      defer { Task { try? await origin.shutdown() } }
      let cache = try MediaCache(configuration: .init(directory: FilePath("\(directory)/cache")))
      var configuration = CachingReader.Configuration()
      // Neither the grace nor the read-ahead ends the flight while the test runs: only a cancel does.
      configuration.abandonedRequestGrace = .seconds(600)
      configuration.abandonedRequestReadAhead = 1 << 30
      let reader = CachingReader(cache: cache, client: OriginClient(), configuration: configuration)
      // 16 MiB, 16 KiB every 200 ms after the first 64 KiB: the flight needs over 200 s, so a finish that does
      // not cancel it leaves it running past the finish's minute. A loaded machine must not let it end before
      // the test cancels it: CI, 2026-12-07, found a flight of 1 MiB (12 s) complete, on a host where the tests
      // run at once waited some 50 s each.
      let size = 16 << 20
      let url = origin.url(.slow, "finish", size: size, query: "delay-ms=200&burst=65536")
      let bytes = try await reader.read(url)
      var received = 0
      for try await piece in bytes {
        received += piece.count
        if received >= 1000 { break }
      }
      // The read is dropped early; its flight goes on (its grace and read-ahead), holding the object open.
      bytes.close()
      #expect(received >= 1000)
      #expect(!reader.registry.isQuiet)
      #expect(!reader.liveOriginFetches.isEmpty)
      // The read's close committed what had arrived (a flush); the flight takes four more pieces after it.
      let burst = 65536
      let piece = 16384
      let deadline = ContinuousClock.now + .seconds(30)
      while origin.totalBodyBytes(for: "finish") < burst + 4 * piece, ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(20))
      }
      #expect(origin.totalBodyBytes(for: "finish") >= burst + 4 * piece)

      await reader.finishOpenObjects(within: .seconds(60))
      #expect(reader.registry.isQuiet)
      #expect(reader.liveOriginFetches.isEmpty)
      // Committed: the bytes that arrived after the read's flush too (all but one piece in transit, at most), but
      // not the whole object (cancelled).
      let status = try await cache.status(for: url)
      guard case .partial(let cached, let length, let ranges) = status else {
        Issue.record("status \(status)")
        return
      }
      #expect(length == Int64(size))
      #expect(cached >= Int64(burst + 3 * piece) && cached < Int64(size), "\(cached)")
      #expect(ranges.first?.lowerBound == 0)
      try await reader.client.shutdown()
    }
  }
}
