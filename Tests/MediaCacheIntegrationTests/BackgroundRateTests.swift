import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// `CachingReader.Configuration.backgroundBytesPerSecond`: background work (a prefetch) takes the origin's
/// bytes at the rate asked for, while a player's read beside it is not slowed. Real origin on 127.0.0.1, real
/// cache; the bounds are generous (a loaded 2-core machine), and the lower one cannot be met without the limit.
@Suite(.serialized)
struct BackgroundRateTests {
  @Test func backgroundWorkKeepsToItsRateAndPlayersDoNot() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    try await withOrigin { origin in
      let cache = try MediaCache(
        configuration: .init(directory: FilePath(directory.file("cache")), chunkSize: 64 << 10))
      var configuration = CachingReader.Configuration()
      let rate: Int64 = 512 << 10
      configuration.backgroundBytesPerSecond = rate
      let client = OriginClient()
      let reader = CachingReader(cache: cache, client: client, configuration: configuration)
      let size = 2 << 20
      let background = origin.url(.normal, "rate-background", size: size)
      let player = origin.url(.normal, "rate-player", size: size)

      let started = ContinuousClock.now
      let prefetch = Task {
        for try await _ in reader.prefetch(background) {}
        return ContinuousClock.now - started
      }
      // A player's read of as many bytes, started while the prefetch runs.
      try await Task.sleep(for: .milliseconds(200))
      let read = try await reader.read(player)
      var received = 0
      for try await piece in read { received += piece.count }
      read.close()
      let playerTime = ContinuousClock.now - started
      let prefetchTime = try await prefetch.value
      try await client.shutdown()

      #expect(received == size)
      // 2 MiB at 512 KiB/s with a burst of 128 KiB: at least (2 MiB - 128 KiB) / 512 KiB/s = 3.75 s; an
      // unlimited prefetch from loopback takes well under a second.
      #expect(prefetchTime >= .seconds(3.5), "the prefetch took \(prefetchTime)")
      #expect(prefetchTime < .seconds(30), "the prefetch took \(prefetchTime)")
      // The player's 2 MiB, not limited, arrive long before the prefetch's.
      #expect(playerTime < prefetchTime - .seconds(1.5), "player \(playerTime), prefetch \(prefetchTime)")
      // Fetched once: the limit slows the origin's connection, it does not cut it.
      let sent = origin.allRequests().filter { $0.name == "rate-background" }.reduce(0) {
        $0 + $1.bodyBytesSent
      }
      #expect(sent == size)
    }
  }

  @Test func aRateBelowOneByteIsRefused() {
    var configuration = CachingReader.Configuration()
    configuration.backgroundBytesPerSecond = 0
    #expect(throws: CachingReader.ConfigurationError.invalidLimit(name: "backgroundBytesPerSecond", value: 0))
    {
      try configuration.validate()
    }
  }
}
