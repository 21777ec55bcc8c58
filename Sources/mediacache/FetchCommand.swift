import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheStreaming
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

struct FetchCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "fetch",
    abstract: "Cache URL (or one byte range of it) from the origin, fetching only what is missing.",
    discussion: """
      Shows a progress bar with bytes, rate and ETA on a terminal, plain lines otherwise. Exits 0 once the \
      range is cached; an interrupted fetch resumes where it stopped.

      With --hls, URL is an HLS playlist. A master playlist's variant with the highest BANDWIDTH is chosen \
      (or the one --variant names), then every URI of its media playlist (keys, init sections, segments) is \
      cached, and the playlists too, with one progress display for the whole set. A URI that cannot be \
      fetched ends the command with an error naming it; run it again to resume. Playlists are cached like any \
      object and not fetched again, so this suits video on demand: a live playlist's later segments are not seen.

      With --dash, URL is a DASH MPD (static only; a live type="dynamic" MPD is refused). In each \
      adaptation set of every period one representation is chosen: the one --representation names, else the \
      highest bandwidth; its initialization segment and every media segment (SegmentTemplate with $Number$ \
      or a SegmentTimeline, SegmentList, SegmentBase) are cached, and the MPD too. Byte-range segments are \
      fetched as whole files. More than --max-segments segments in all is refused before anything is fetched.

      With --group, every object the command caches (for --hls and --dash: the playlists or MPD and every \
      file) joins that group, even when the fetch stops early; `mediacache rm --group` removes them together.

      Examples:
        mediacache fetch https://cdn.example.com/v.mp4
        mediacache fetch https://cdn.example.com/v.mp4 --range 0-1048575
        mediacache fetch --hls https://cdn.example.com/show/master.m3u8 --variant 0
        mediacache fetch --dash https://cdn.example.com/show/manifest.mpd --representation 720p
      """)

  @OptionGroup var cache: CacheOptions
  @OptionGroup var origin: OriginOptions
  @Argument(
    help: ArgumentHelp("The http or https URL (cached under its key after --ignore-query).", valueName: "URL")
  )
  var url: String
  @Option(help: "Inclusive byte range START-END (or START-).") var range: ByteRangeArgument?
  @Flag(help: "URL is an HLS playlist: cache a variant's playlist, keys, init sections and segments.")
  var hls = false
  @Option(
    help: ArgumentHelp(
      "With --hls and a master playlist: the variant to fetch, 0-based in playlist order.",
      discussion: "Default: the variant with the highest BANDWIDTH.", valueName: "N"))
  var variant: Int?
  @Flag(help: "URL is a DASH MPD: cache one representation per adaptation set, its init and media segments.")
  var dash = false
  @Option(
    name: .customLong("representation"),
    help: ArgumentHelp(
      "With --dash: the Representation@id to fetch in each adaptation set that has it (repeatable).",
      discussion: "Default (and in sets without it): the representation with the highest bandwidth.",
      valueName: "ID"))
  var representations: [String] = []
  @Option(help: "With --dash: the most segments the chosen representations may list in all.")
  var maxSegments: Int = MPDSegments.defaultSegmentLimit
  @Option(help: "Chunk size in bytes for a new object (default 1 MiB).") var chunkSize: Int = 1 << 20
  @Option(help: "durable (fsync data before each manifest commit) or relaxed.") var durability: Durability =
    .durable
  @OptionGroup var requestLimits: RequestLimitOptions
  @Option(help: "Put every object fetched in group G (any name: a file id, an account).") var group: String?

  func validate() throws {
    try validateGroupOption(group)
    if hls && range != nil { throw ValidationError("--range cannot be combined with --hls") }
    if variant != nil && !hls { throw ValidationError("--variant needs --hls") }
    if let variant, variant < 0 { throw ValidationError("--variant must be 0 or more, not \(variant)") }
    try validateChunkSizeOption(chunkSize)
    try validateDASH()
  }

  func run() async throws {
    if dash {
      try await reportingErrors { try await fetchDASH() }
      return
    }
    if hls {
      try await reportingErrors { try await fetchHLS() }
      return
    }
    try await reportingErrors { try await withReader { try await fetchRange(reader: $0) } }
  }

  /// `fetch URL [--range]`: prefetches the range with a progress bar (a terminal) or a line a second, then
  /// checks that every byte asked for is cached.
  func fetchRange(reader: CachingReader) async throws {
    let requested: RequestedRange
    if let range {
      requested = range.end.map { .bounded(range.start..<($0 + 1)) } ?? .from(range.start)
    } else {
      requested = .all
    }
    let terminal = isatty(STDERR_FILENO) == 1
    var lastLine = Date.distantPast
    var last: PrefetchProgress?
    do {
      // The bar's line ends before anything else is printed, whether the prefetch ends or fails.
      defer { if terminal { FileHandle.standardError.write(Data("\n".utf8)) } }
      let updates = reader.prefetch(url, range: requested)
      try await joiningGroup([url], cache: reader.cache) {
        for try await progress in updates {
          last = progress
          if terminal {
            FileHandle.standardError.write(Data(("\r" + Self.bar(progress)).utf8))
          } else if Date().timeIntervalSince(lastLine) >= 1 {
            lastLine = Date()
            FileHandle.standardError.write(Data((Self.line(progress) + "\n").utf8))
          }
        }
      }
    }
    let mediaCache = reader.cache
    guard let manifest = try await mediaCache.manifest(for: url) else {
      // An empty object an origin answers with `416 bytes */0` is not stored (`CachingReader`): nothing to
      // cache. Any other fetch that did not fail and left no manifest committed nothing (an empty object
      // whose commit failed writes no data file first, where a write of bytes would have failed the fetch).
      if last?.totalBytes == 0 && last?.fetchedBytes == 0 {
        printOut("cached \(url): empty (the origin has no bytes of it; nothing stored)")
        return
      }
      throw fail(
        "\(url): nothing of it is cached after the fetch (its commit failed, or another process removed it)",
        .failure)
    }
    let wanted: Range<Int64>? = manifest.contentLength.map { length in
      guard let range else { return 0..<length }
      return range.start..<min(length, (range.end ?? (length - 1)) + 1)
    }
    if let wanted, !manifest.missingByteRanges(in: wanted).isEmpty {
      throw StoreError.notCached(manifest.objectID, missing: manifest.missingByteRanges(in: wanted))
    }
    let status = try await mediaCache.status(for: url)
    let fetched = last?.fetchedBytes ?? 0
    printOut("cached \(url): \(status.humanLine); fetched \(fetched) bytes from the origin")
  }

  /// Runs `body`, then — whether it succeeded or not — puts each of `uris` that has bytes cached in `--group`
  /// (nothing without the option).
  func joiningGroup<T>(_ uris: [String], cache: MediaCache, _ body: () async throws -> T) async throws -> T {
    guard let group else { return try await body() }
    let result: Result<T, any Error>
    do { result = .success(try await body()) } catch { result = .failure(error) }
    for uri in uris {
      do {
        try await cache.setGroup(group, for: uri)
      } catch let error as StoreError where error.code == .notFound {
        continue
      }
    }
    return try result.get()
  }

  static func line(_ progress: PrefetchProgress) -> String {
    let percent =
      progress.totalBytes > 0 ? Double(progress.cachedBytes) * 100 / Double(progress.totalBytes) : 100
    return String(
      format: "%lld/%lld bytes (%.1f%%), %.1f MiB/s", progress.cachedBytes, progress.totalBytes, percent,
      progress.bytesPerSecond / 1_048_576)
  }

  static func bar(_ progress: PrefetchProgress) -> String {
    let share = progress.totalBytes > 0 ? Double(progress.cachedBytes) / Double(progress.totalBytes) : 1
    let width = 30
    let filled = Int(share * Double(width))
    let remaining = Double(max(0, progress.totalBytes - progress.cachedBytes))
    let eta = progress.bytesPerSecond > 0 ? remaining / progress.bytesPerSecond : 0
    return "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
      + line(progress) + String(format: ", ETA %.0f s ", eta)
  }
}

extension Durability: ExpressibleByArgument {}
