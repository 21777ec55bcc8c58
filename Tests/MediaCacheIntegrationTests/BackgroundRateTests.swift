import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Synchronization
import Testing

/// `CachingReader.Configuration.backgroundBytesPerSecond`: background work (a prefetch) takes the origin's
/// bytes at no more than the rate asked for, while a player's read beside it is not slowed. Real origin on
/// 127.0.0.1, real cache. The rate is so low (16 KiB/s) that both checks hold on a machine however loaded (the
/// cap is an upper bound on the prefetch's pace, and a capped player would need over two minutes), and both
/// fail without the cap (an uncapped prefetch takes all 2 MiB in well under a second; a capped player misses
/// its bound by a minute).
@Suite(.serialized)
struct BackgroundRateTests {
  @Test func backgroundWorkKeepsToItsRateAndPlayersDoNot() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    try await withOrigin { origin in
      let cache = try MediaCache(
        configuration: .init(directory: FilePath(directory.file("cache")), chunkSize: 64 << 10))
      var configuration = CachingReader.Configuration()
      let rate: Int64 = 16 << 10
      configuration.backgroundBytesPerSecond = rate
      let client = OriginClient()
      let reader = CachingReader(cache: cache, client: client, configuration: configuration)
      let size = 2 << 20
      let background = origin.url(.normal, "rate-background", size: size)
      let player = origin.url(.normal, "rate-player", size: size)

      let started = ContinuousClock.now
      let cached = Mutex<Int64>(0)
      let prefetch = Task {
        for try await progress in reader.prefetch(background) {
          cached.withLock { $0 = progress.cachedBytes }
        }
      }
      // A player's read of 2 MiB while the prefetch runs (at 16 KiB/s it would take over two minutes), started
      // once the prefetch has cached its first bytes, so that the figure below is one of its reports.
      while cached.withLock({ $0 }) == 0, ContinuousClock.now - started < .seconds(30) {
        try await Task.sleep(for: .milliseconds(20))
      }
      let read = try await reader.read(player)
      var received = 0
      for try await piece in read { received += piece.count }
      read.close()
      let elapsed = ContinuousClock.now - started
      // What the prefetch has cached by now (its origin has sent more: the socket buffers hold megabytes): at
      // most the rate over the time, one burst (64 KiB at this rate) and a body part or two the bucket counts
      // after they arrived. Its progress is sampled every 0.2 s, so the figure is at most that old.
      let taken = cached.withLock { $0 }
      prefetch.cancel()
      _ = await prefetch.result
      try await client.shutdown()

      #expect(received == size)
      #expect(elapsed < .seconds(100), "the player's 2 MiB took \(elapsed)")
      let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
      let bound = Int64(Double(rate) * seconds) + (64 << 10) + (256 << 10)
      #expect(taken > 0 && taken <= bound, "the prefetch took \(taken) bytes in \(elapsed) (bound \(bound))")
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
