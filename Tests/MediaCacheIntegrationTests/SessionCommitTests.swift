import Foundation
import Logging
import MediaCache
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
}
