import ArgumentParser
import Foundation
import Logging
import MediaCache
import MediaCacheHTTP

struct PreloadCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "preload",
    abstract: "Cache what a player reads to start each URL and play its first --seconds.",
    discussion: """
      For an MP4 or QuickTime file (moov at the head or at the tail), the ranges come from its sample \
      tables: the boxes before moov, moov, and every track's samples decoded before --seconds; nothing \
      else is fetched. A fragmented MP4: moov, and each moof and mdat whose first decoding time is before \
      --seconds. An HLS playlist: the playlist, a master playlist's first variant and its playlist, and \
      the keys, init sections and segments that start before --seconds + 0.75 s. Any other file (or an MP4 \
      that cannot be used): an estimate from the start, --seconds at --fallback-bitrate, with the reason on \
      stderr. Whole chunks are fetched, as for any read. URLs are preloaded one after the other, in the \
      order given; each prints one line: what was planned and the bytes fetched from the origin.

      Examples:
        mediacache preload https://cdn.example.com/a.mp4 https://cdn.example.com/b.mp4 --seconds 5
      """)

  @OptionGroup var cache: CacheOptions
  @OptionGroup var origin: OriginOptions
  @Argument(help: ArgumentHelp("The http or https URLs to preload.", valueName: "URL"))
  var urls: [String]
  @Option(help: "Seconds of media to preload from the start of each URL.") var seconds: Double = 5
  @Option(
    help: ArgumentHelp(
      "Bits per second assumed for a file whose sample tables cannot be used.", valueName: "BITS"))
  var fallbackBitrate: Double = 4_000_000
  @Option(help: "Chunk size in bytes for a new object (default 1 MiB).") var chunkSize: Int = 1 << 20
  @Option(help: "durable (fsync data before each manifest commit) or relaxed.") var durability: Durability =
    .durable
  @OptionGroup var requestLimits: RequestLimitOptions

  func validate() throws {
    guard seconds >= 0, seconds.isFinite else { throw ValidationError("--seconds must be 0 or more") }
    guard fallbackBitrate > 0, fallbackBitrate.isFinite else {
      throw ValidationError("--fallback-bitrate must be positive")
    }
  }

  func run() async throws {
    try await reportingErrors {
      try await withCachingReader(
        cache: cache, origin: origin, chunkSize: chunkSize, durability: durability,
        requestLimits: requestLimits
      ) { reader in
        var logger = Logger(label: "mediacache.preload")
        logger.logLevel = .warning
        let planner = StartPlanner(reader: reader, fallbackBitsPerSecond: fallbackBitrate, logger: logger)
        for url in urls {
          let plan = try await planner.plan(url, seconds: seconds)
          // What the prefetches fetched (the planner's own reads of box headers, moov and playlists come
          // before).
          var fetched: Int64 = 0
          for part in plan.parts {
            for range in part.requests {
              var last: Int64 = 0
              for try await progress in reader.prefetch(part.url, range: range) {
                last = progress.fetchedBytes
              }
              fetched += last
            }
          }
          let how =
            switch plan.source {
            case .mp4SampleTables:
              "= \(plan.byteCount) bytes in \(plan.parts.first?.ranges?.count ?? 0) ranges from its sample tables"
            case .mp4Fragments:
              "= \(plan.byteCount) bytes in \(plan.parts.first?.ranges?.count ?? 0) ranges from its fragments"
            case .dashSegments: "in \(plan.parts.count) files (the MPD, initialization and media segments)"
            case .hlsSegments: "in \(plan.parts.count) files (playlists, keys, init sections, segments)"
            case .estimate(let reason):
              "from the start, estimated at \(Int(fallbackBitrate)) bit/s (\(reason))"
            }
          printOut(
            "preloaded \(url): \(seconds) s \(how); fetched \(fetched) bytes from the origin")
        }
      }
    }
  }
}
