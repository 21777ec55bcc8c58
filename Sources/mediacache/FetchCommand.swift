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

      Examples:
        mediacache fetch https://cdn.example.com/v.mp4
        mediacache fetch https://cdn.example.com/v.mp4 --range 0-1048575
        mediacache fetch --hls https://cdn.example.com/show/master.m3u8 --variant 0
        mediacache fetch --dash https://cdn.example.com/show/manifest.mpd --representation 720p
      """)

  @OptionGroup var cache: CacheOptions
  @OptionGroup var tls: TLSOptions
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

  func validate() throws {
    if hls && range != nil { throw ValidationError("--range cannot be combined with --hls") }
    if variant != nil && !hls { throw ValidationError("--variant needs --hls") }
    if let variant, variant < 0 { throw ValidationError("--variant must be 0 or more, not \(variant)") }
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
    try await reportingErrors {
      let client = try tls.client()
      // Commit often enough that an interrupted fetch loses at most a second (or 32 MiB) of work, and seldom
      // enough that durable mode does not fsync more than it must.
      let mediaCache = try await cache.openOnExecutor(
        chunkSize: chunkSize, durability: durability, commitPolicy: .init(bytes: 32 << 20, interval: 1))
      let reader = CachingReader(
        cache: mediaCache, client: client, configuration: requestLimits.configuration())
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
        for try await progress in reader.prefetch(url, range: requested) {
          last = progress
          if terminal {
            FileHandle.standardError.write(Data(("\r" + Self.bar(progress)).utf8))
          } else if Date().timeIntervalSince(lastLine) >= 1 {
            lastLine = Date()
            FileHandle.standardError.write(Data((Self.line(progress) + "\n").utf8))
          }
        }
      } catch {
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
        await mediaCache.closing.waitForAll()  // what was fetched is committed before the process ends
        try? await client.shutdown()
        if let originError = error as? OriginError { throw fail(originError.description, .failure) }
        throw error
      }
      try? await client.shutdown()
      if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
      let manifest = try await mediaCache.manifest(for: url)
      let wanted: Range<Int64>? = manifest?.contentLength.map { length in
        guard let range else { return 0..<length }
        return range.start..<min(length, (range.end ?? (length - 1)) + 1)
      }
      if let manifest, let wanted, !manifest.missingByteRanges(in: wanted).isEmpty {
        throw StoreError.notCached(manifest.objectID, missing: manifest.missingByteRanges(in: wanted))
      }
      let status = try await mediaCache.status(for: url)
      let fetched = last?.fetchedBytes ?? 0
      printOut("cached \(url): \(status.humanLine); fetched \(fetched) bytes from the origin")
    }
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

// MARK: HLS

extension FetchCommand {
  /// `fetch --hls`: the playlist (and, for a master, the chosen variant's playlist), then every URI of the
  /// media playlist in fetch order (see `prefetchAll`), with one progress display.
  func fetchHLS() async throws {
    try await withManifestReader { try await fetchHLS(reader: $0) }
  }

  /// Runs `body` with a reader over the cache whose origin client and limits come from the options (TLS
  /// trust, request limits), then shuts the client down. An origin, playlist or MPD error ends the command
  /// with its one line. `--hls` and `--dash` share it, so an option cannot apply to one and not the other.
  func withManifestReader(_ body: (CachingReader) async throws -> Void) async throws {
    let client = try tls.client()
    let mediaCache = try await cache.openOnExecutor(
      chunkSize: chunkSize, durability: durability, commitPolicy: .init(bytes: 32 << 20, interval: 1))
    let reader = CachingReader(
      cache: mediaCache, client: client, configuration: requestLimits.configuration())
    do {
      try await body(reader)
    } catch {
      await mediaCache.closing.waitForAll()  // what was fetched is committed before the process ends
      try? await client.shutdown()
      switch error {
      case let error as OriginError: throw fail(error.description, .failure)
      case let error as HLSError: throw fail(error.description, .failure)
      case let error as MPDSegmentError: throw fail(error.description, .failure)
      default: throw error
      }
    }
    await mediaCache.closing.waitForAll()
    try? await client.shutdown()
  }

  private func fetchHLS(reader: CachingReader) async throws {
    guard let playlistURL = URL(string: url) else { throw OriginError.invalidURL(url) }
    var playlists = [url]
    var mediaURL = playlistURL
    let media: HLSPlaylist.MediaPlaylist
    switch try await Self.readPlaylist(url, reader: reader) {
    case .media(let list):
      if variant != nil {
        throw fail("--variant applies to a master playlist; \(url) is a media playlist", .usage)
      }
      media = list
    case .master(let variants):
      let index = try chooseVariant(variants)
      let chosen = variants[index]
      printOut("variant \(index) of \(variants.count): \(Self.describe(chosen))")
      mediaURL = chosen.uri
      playlists.append(chosen.uri.absoluteString)
      guard case .media(let list) = try await Self.readPlaylist(chosen.uri.absoluteString, reader: reader)
      else {
        throw fail(
          "variant playlist \(chosen.uri.absoluteString) is a master playlist, not a media playlist", .failure
        )
      }
      media = list
    }
    let uris = media.allURIs.map(\.absoluteString)
    let final = try await Self.prefetchShowingProgress(
      uris, prerequisites: Set((media.keys + media.maps).map(\.absoluteString)), reader: reader)
    // Everything the player needs is on disk, or the exit status says what is not.
    try await Self.requireComplete(playlists + uris, reader: reader)
    let segments = Set(media.segments).count
    printOut(
      "cached HLS \(mediaURL.absoluteString): \(Self.count(uris.count, "file")) (\(Self.count(segments, "segment")), "
        + "\(Self.count(media.keys.count, "key")), \(Self.count(media.maps.count, "init section"))), "
        + "\(final.cachedBytes) bytes; fetched \(final.fetchedBytes) bytes from the origin")
  }

  /// `1 file`, `2 files`.
  static func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }

  /// The variant `--variant` names, else the one with the highest BANDWIDTH (the first of equals).
  private func chooseVariant(_ variants: [HLSPlaylist.Variant]) throws -> Int {
    guard !variants.isEmpty else { throw fail("\(url): the master playlist lists no variants", .failure) }
    if let variant {
      guard variants.indices.contains(variant) else {
        let list = variants.enumerated().map { "  \($0.offset): \(Self.describe($0.element))" }
        throw fail(
          "--variant \(variant) is out of range; \(url) has \(Self.count(variants.count, "variant")):\n"
            + list.joined(separator: "\n"), .usage)
      }
      return variant
    }
    var best = 0
    for (index, candidate) in variants.enumerated()
    where (candidate.bandwidth ?? -1) > (variants[best].bandwidth ?? -1) {
      best = index
    }
    return best
  }

  static func describe(_ variant: HLSPlaylist.Variant) -> String {
    var fields: [String] = []
    if let bandwidth = variant.bandwidth { fields.append("BANDWIDTH=\(bandwidth)") }
    if let resolution = variant.resolution { fields.append("RESOLUTION=\(resolution)") }
    if let codecs = variant.codecs { fields.append("CODECS=\(codecs)") }
    fields.append(variant.uri.absoluteString)
    return fields.joined(separator: " ")
  }

  /// Reads a whole playlist through the cache (so it is cached too) and parses it. Refuses more than
  /// `HLSPlaylist.maxPlaylistBytes` without reading past them.
  static func readPlaylist(_ url: String, reader: CachingReader) async throws -> HLSPlaylist.Playlist {
    guard let playlistURL = URL(string: url) else { throw OriginError.invalidURL(url) }
    let limit = HLSPlaylist.maxPlaylistBytes
    let bytes = try await reader.read(url)
    defer { bytes.close() }
    if let length = bytes.length, length > limit {
      throw HLSError.tooLarge(url: url, bytes: Int(clamping: length), limit: limit)
    }
    var body = Data()
    for try await piece in bytes {
      body.append(piece)
      if body.count > limit { throw HLSError.tooLarge(url: url, bytes: body.count, limit: limit) }
    }
    guard let text = String(data: body, encoding: .utf8) else {
      throw fail("\(url) is not an HLS playlist: it is not UTF-8 text", .failure)
    }
    return try HLSPlaylist.parse(text, playlistURL: playlistURL)
  }

  /// `prefetchAll` with its progress on standard error (a bar on a terminal, a line a second otherwise);
  /// returns the final snapshot.
  static func prefetchShowingProgress(_ uris: [String], prerequisites: Set<String>, reader: CachingReader)
    async throws -> HLSFetchProgress.Snapshot
  {
    let progress = HLSFetchProgress(total: uris.count)
    let terminal = isatty(STDERR_FILENO) == 1
    let display = Task {
      var lastLine = Date()
      while !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(200))
        let snapshot = progress.snapshot()
        if terminal {
          FileHandle.standardError.write(Data(("\r" + snapshot.bar).utf8))
        } else if Date().timeIntervalSince(lastLine) >= 1 {
          lastLine = Date()
          FileHandle.standardError.write(Data((snapshot.line + "\n").utf8))
        }
      }
    }
    do {
      try await prefetchAll(uris, prerequisites: prerequisites, reader: reader, progress: progress)
    } catch {
      display.cancel()
      if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
      throw error
    }
    display.cancel()
    let final = progress.snapshot()
    if terminal { FileHandle.standardError.write(Data(("\r" + final.bar + "\n").utf8)) }
    return final
  }

  /// Throws `StoreError.notCached` (with the missing ranges) for the first of `uris` not completely cached.
  static func requireComplete(_ uris: [String], reader: CachingReader) async throws {
    for uri in uris {
      guard case .complete = try await reader.cache.status(for: uri) else {
        let manifest = try await reader.cache.manifest(for: uri)
        throw StoreError.notCached(
          reader.cache.objectID(for: uri),
          missing: manifest?.missingByteRanges(in: 0..<Int64.max) ?? [0..<Int64.max])
      }
    }
  }

  /// Origin fetches running at once for `fetch --hls` (the reader's limiter caps requests at 6 anyway).
  static let parallelFetches = 4

  /// Prefetches every URI in order, up to `parallelFetches` segments at a time. A key or init section
  /// (`prerequisites`) is cached before any URI after it is started, so the segments that need it never come
  /// first. The first failure cancels the rest and is rethrown naming the URI.
  static func prefetchAll(
    _ uris: [String], prerequisites: Set<String>, reader: CachingReader, progress: HLSFetchProgress
  ) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
      var running = 0
      for (index, uri) in uris.enumerated() {
        if prerequisites.contains(uri) {
          // In this task, while the segments already started go on.
          try await prefetch(uri, index: index, of: uris.count, reader: reader, progress: progress)
          continue
        }
        if running == parallelFetches {
          _ = try await group.next()
          running -= 1
        }
        group.addTask {
          try await prefetch(uri, index: index, of: uris.count, reader: reader, progress: progress)
        }
        running += 1
      }
      try await group.waitForAll()
    }
  }

  /// Prefetches one whole URI, reporting to `progress` as file `index`.
  private static func prefetch(
    _ uri: String, index: Int, of total: Int, reader: CachingReader, progress: HLSFetchProgress
  ) async throws {
    do {
      // What was cached before, so that the bytes fetched are counted even for a file so small that it is
      // complete before the prefetch reports anything.
      let before = try await reader.cache.manifest(for: uri)?.cachedBytes ?? 0
      progress.start(index, cachedBefore: before)
      for try await step in reader.prefetch(uri) { progress.update(index, cachedBytes: step.cachedBytes) }
      try Task.checkCancellation()
      progress.finish(index)
    } catch let error as OriginError {
      throw error  // names the URL already
    } catch is CancellationError {
      throw CancellationError()
    } catch {
      throw HLSFetchError(uri: uri, position: index + 1, total: total, underlying: error)
    }
  }
}

/// A file of an HLS set that could not be cached, for a reason other than the origin (those name the URL).
struct HLSFetchError: Error, CustomStringConvertible {
  var uri: String
  var position: Int
  var total: Int
  var underlying: any Error
  var description: String { "\(uri) (file \(position) of \(total)): \(underlying)" }
}

/// Progress of `fetch --hls` over the whole set: files done, bytes cached and fetched, origin rate.
final class HLSFetchProgress: Sendable {
  struct Snapshot {
    var done: Int
    var total: Int
    var cachedBytes: Int64
    var fetchedBytes: Int64
    var bytesPerSecond: Double

    var line: String {
      String(
        format: "%d/%d files, %lld bytes cached, %lld fetched, %.1f MiB/s", done, total, cachedBytes,
        fetchedBytes, bytesPerSecond / 1_048_576)
    }

    var bar: String {
      let width = 30
      let filled = total > 0 ? done * width / total : width
      return "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        + "] "
        + line + " "
    }
  }

  private struct State {
    var done = 0
    /// Per running file: bytes cached before it started, and now.
    var running: [Int: (before: Int64, now: Int64)] = [:]
    var finishedCached: Int64 = 0
    var finishedFetched: Int64 = 0
  }

  private let state = Mutex(State())
  private let total: Int
  private let started = Date()

  init(total: Int) { self.total = total }

  /// Notes that file `index` starts with `cachedBefore` bytes already cached.
  func start(_ index: Int, cachedBefore: Int64) {
    state.withLock { $0.running[index] = (cachedBefore, cachedBefore) }
  }

  /// Records how many bytes of file `index` are cached now.
  func update(_ index: Int, cachedBytes: Int64) {
    state.withLock { state in
      let before = state.running[index]?.before ?? 0
      state.running[index] = (before, max(before, cachedBytes))
    }
  }

  /// Marks file `index` as cached.
  func finish(_ index: Int) {
    state.withLock { state in
      guard let last = state.running.removeValue(forKey: index) else { return }
      state.done += 1
      state.finishedCached += last.now
      state.finishedFetched += last.now - last.before
    }
  }

  func snapshot() -> Snapshot {
    state.withLock { state in
      let running = state.running.values
      let fetched = state.finishedFetched + running.reduce(0) { $0 + ($1.now - $1.before) }
      let elapsed = max(Date().timeIntervalSince(started), 0.001)
      return Snapshot(
        done: state.done, total: total, cachedBytes: state.finishedCached + running.reduce(0) { $0 + $1.now },
        fetchedBytes: fetched, bytesPerSecond: Double(fetched) / elapsed)
    }
  }
}
