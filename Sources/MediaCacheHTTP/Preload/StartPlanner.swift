import Foundation
import Logging
import MediaCache
import MediaCacheStreaming

/// What to fetch so that a player can start an item and play its first seconds from the cache:
///
/// - an MP4 or QuickTime file: the byte ranges of its first seconds (its head boxes, `moov` and the samples,
///   from `MP4StartRanges`);
/// - an HLS playlist: the playlist, for a master playlist the variant a player starts on (the first listed, or
///   the highest `BANDWIDTH` under `maxBandwidth`) and its playlist, and the keys, init sections and segments
///   that cover the first seconds (`HLSPlaylist.MediaPlaylist.startURIs`);
/// - a DASH MPD (static): the MPD, and in each adaptation set of the first period the first representation (or
///   the highest `bandwidth` under `maxBandwidth`): its initialization and index segments and the media
///   segments that start before the seconds plus `HLSPlaylist.MediaPlaylist.interleaveMargin` (the first
///   only, where the addressing gives no times);
/// - anything else, or an MP4 whose tables cannot be used: an estimate in bytes from the start.
///
/// The bytes it reads to decide (box headers, `moov`, playlists) are read through the `CachingReader` at
/// background priority, so they are cached too: the player reads them again to start.
public struct StartPlanner: Sendable {
  /// How the plan was made.
  public enum Source: Sendable, Equatable {
    /// From the MP4's sample tables: exactly what a player reads for the first seconds (and the boxes before).
    case mp4SampleTables
    /// From a fragmented MP4's fragments: `moov`, and each `moof` and `mdat` whose first decoding time is
    /// before the time.
    case mp4Fragments
    /// From an HLS media playlist: the segments (whole) that start before the time, with their keys and maps.
    case hlsSegments
    /// From a DASH MPD: each adaptation set's initialization and the media segments that start before the time.
    case dashSegments
    /// From the bitrate (`StartPlanner.fallbackBitsPerSecond`), from the start, because nothing better could
    /// be used: `reason` says why (an `MP4Error`'s description, or "not an MP4").
    case estimate(reason: String)
  }

  /// One object to fetch: some byte ranges of it, or all of it.
  public struct Part: Sendable, Equatable {
    /// The object's URL.
    public var url: String
    /// Sorted, disjoint byte ranges; nil: the whole object (an HLS playlist, key or segment).
    public var ranges: [Range<Int64>]?

    /// The reads that fetch the part: one per range, or one of the whole object.
    public var requests: [RequestedRange] { ranges.map { $0.map { .bounded($0) } } ?? [.all] }

    /// `ranges` of the object at `url` (nil: all of it).
    public init(url: String, ranges: [Range<Int64>]?) {
      self.url = url
      self.ranges = ranges
    }
  }

  /// What to fetch for one item.
  public struct Plan: Sendable, Equatable {
    /// The item's URL.
    public var url: String
    /// The objects to fetch, in order (a playlist before its segments).
    public var parts: [Part]
    /// How it was made.
    public var source: Source
    /// The media's duration in seconds, where the file says it (an MP4's `mvhd`).
    public var duration: Double?

    /// Bytes of the parts' ranges (whole objects are not counted: their size is known once fetched).
    public var byteCount: Int64 {
      parts.reduce(0) { sum, part in sum + (part.ranges?.reduce(0) { $0 + Int64($1.count) } ?? 0) }
    }
  }

  let reader: CachingReader
  /// The bitrate assumed for a file whose duration is not known (default 4 Mbit/s).
  public var fallbackBitsPerSecond: Double
  /// The highest `BANDWIDTH` of an HLS variant to start on (nil, the default: the first listed, as players do).
  public var maxBandwidth: Int?
  let logger: Logger

  /// A planner reading through `reader`; `logger` gets one line per fallback, with its reason.
  public init(
    reader: CachingReader, fallbackBitsPerSecond: Double = 4_000_000, maxBandwidth: Int? = nil,
    logger: Logger = Logger(label: "mediacache.preload")
  ) {
    precondition(fallbackBitsPerSecond > 0, "fallbackBitsPerSecond must be positive")
    self.reader = reader
    self.fallbackBitsPerSecond = fallbackBitsPerSecond
    self.maxBandwidth = maxBandwidth
    self.logger = logger
  }

  /// The plan for the first `seconds` of the item at `url`.
  ///
  /// - Throws: `OriginError` and `StoreError` from the reads, `HLSError` for a playlist that cannot be used
  ///   (an MP4 whose tables cannot be used is not an error: it gets an estimate).
  public func plan(_ url: String, seconds: Double) async throws -> Plan {
    precondition(seconds >= 0 && seconds.isFinite, "seconds must be finite and not negative")
    let head = try await read(url, .bounded(0..<32))
    guard let length = head.length else {
      throw OriginError.inconsistentResponse(url: url, reason: "the origin gives no length")
    }
    if HLSPlaylist.isPlaylist(contentType: head.contentType, url: url, prefix: head.bytes) {
      return try await hlsPlan(url, seconds: seconds)
    }
    if MPDRewriter.mayBeManifest(contentType: head.contentType, url: url) {
      return try await dashPlan(url, seconds: seconds)
    }
    let reason: String
    if MP4StartRanges.mayBeMP4(head.bytes) {
      do {
        let plan = try await MP4StartRanges.plan(seconds: seconds, url: url, fileLength: length) { range in
          try await read(url, .bounded(range)).bytes
        }
        return Plan(
          url: url, parts: [Part(url: url, ranges: plan.ranges)],
          source: plan.isFragmented ? .mp4Fragments : .mp4SampleTables,
          duration: plan.duration)
      } catch let error as MP4Error {
        reason = error.description
      }
    } else {
      reason = "\(url): neither an MP4 (no box type it knows in its first 8 bytes) nor an HLS playlist"
    }
    logger.info("preload estimates bytes", metadata: ["url": "\(url)", "reason": "\(reason)"])
    let range = MP4StartRanges.estimatedRange(
      seconds: seconds, fileLength: length, duration: nil, bitsPerSecond: fallbackBitsPerSecond)
    return Plan(
      url: url, parts: [Part(url: url, ranges: range.isEmpty ? [] : [range])],
      source: .estimate(reason: reason))
  }

  /// The playlist at `url`, the variant's playlist for a master one (and its audio rendition's), and the URIs
  /// of the first `seconds`.
  private func hlsPlan(_ url: String, seconds: Double) async throws -> Plan {
    var parts = [Part(url: url, ranges: nil)]
    var media: HLSPlaylist.MediaPlaylist
    switch try await playlist(url) {
    case .media(let playlist): media = playlist
    case .master(let variants):
      guard let variant = startVariant(variants) else {
        throw HLSError.malformedLine(url: url, line: 1, reason: "the master playlist lists no variant")
      }
      parts.append(Part(url: variant.uri.absoluteString, ranges: nil))
      guard case .media(let playlist) = try await playlist(variant.uri.absoluteString) else {
        throw HLSError.malformedLine(
          url: variant.uri.absoluteString, line: 1, reason: "a variant's playlist is a master playlist")
      }
      media = playlist
      // The audio a player plays with it (`defaultAudio`; none when that is in the variant), from its start.
      if let audio = variant.defaultAudio {
        parts.append(Part(url: audio.absoluteString, ranges: nil))
        guard case .media(let rendition) = try await self.playlist(audio.absoluteString) else {
          throw HLSError.malformedLine(
            url: audio.absoluteString, line: 1, reason: "an audio rendition's playlist is a master playlist")
        }
        parts += rendition.startURIs(seconds: seconds).map { Part(url: $0.absoluteString, ranges: nil) }
      }
    }
    parts += media.startURIs(seconds: seconds).map { Part(url: $0.absoluteString, ranges: nil) }
    return Plan(url: url, parts: parts, source: .hlsSegments)
  }

  /// The MPD at `url` and, per adaptation set of its first period, what a player fetches for `seconds`.
  private func dashPlan(_ url: String, seconds: Double) async throws -> Plan {
    let limit = MPDSegments.maxManifestBytes
    let read = try await read(url, .bounded(0..<Int64(limit + 1)))
    guard let mpdURL = URL(string: read.base) else { throw OriginError.invalidURL(url) }
    let presentation = try MPDSegments.parse(Data(read.bytes), url: mpdURL)
    if presentation.isDynamic { throw MPDError.dynamic(url: url) }
    var parts = [Part(url: url, ranges: nil)]
    let end = seconds + HLSPlaylist.MediaPlaylist.interleaveMargin
    for set in presentation.periods.first?.adaptationSets ?? [] {
      guard let representation = startRepresentation(set.representations) else { continue }
      let segments = try representation.segments()
      if let index = segments.first(where: { $0.kind == .index }), let range = index.byteRange {
        parts += try await segmentBaseParts(segments, index: index.url.absoluteString, range: range, end: end)
        continue
      }
      var firstMedia = true
      for segment in segments {
        if segment.kind == .media {
          guard firstMedia || (segment.start.map { $0 < end } ?? false) else { break }
          firstMedia = false
        }
        let ranges = segment.byteRange.map { [$0.lowerBound..<$0.upperBound + 1] }
        parts.append(Part(url: segment.url.absoluteString, ranges: ranges))
      }
    }
    return Plan(url: url, parts: parts, source: .dashSegments)
  }

  /// The most bytes of a `SegmentBase@indexRange` read to plan.
  static let maxIndexBytes: Int64 = 1 << 20

  /// A `SegmentBase` representation (one file, its `sidx` at `range`): its initialization, its index, and the
  /// subsegments the index says start before `end`.
  private func segmentBaseParts(
    _ segments: [MPDSegments.Segment], index url: String, range: ClosedRange<Int64>, end: Double
  ) async throws -> [Part] {
    // Differences, not `range.count` (an Int that a hostile range overflows).
    guard range.upperBound - range.lowerBound < Self.maxIndexBytes else {
      throw MP4Error(
        url: url,
        kind: .tooLarge(type: "sidx", bytes: range.upperBound - range.lowerBound, limit: Self.maxIndexBytes))
    }
    let read = try await read(url, .bounded(range.lowerBound..<range.upperBound + 1))
    let index = try MP4SegmentIndex.parse(
      read.bytes, base: range.lowerBound, fileLength: read.length, url: url)
    let initialization = segments.filter { $0.kind == .initialization }.map { segment in
      Part(
        url: segment.url.absoluteString, ranges: segment.byteRange.map { [$0.lowerBound..<$0.upperBound + 1] }
      )
    }
    return initialization + [
      Part(url: url, ranges: [range.lowerBound..<range.upperBound + 1]),
      Part(url: url, ranges: index.ranges(before: end)),
    ]
  }

  /// The representation a player starts on: the first, or with `maxBandwidth` the highest under it (else the
  /// lowest).
  func startRepresentation(_ representations: [MPDSegments.Representation]) -> MPDSegments.Representation? {
    startChoice(representations) { $0.bandwidth ?? 0 }
  }

  /// The variant a player starts on: the first listed, or with `maxBandwidth` the highest under it (else the
  /// lowest).
  func startVariant(_ variants: [HLSPlaylist.Variant]) -> HLSPlaylist.Variant? {
    startChoice(variants) { Int64($0.bandwidth ?? 0) }
  }

  /// The first of `choices`, or with `maxBandwidth` the one of highest `bandwidth` under it (else the lowest).
  private func startChoice<Choice>(_ choices: [Choice], bandwidth: (Choice) -> Int64) -> Choice? {
    guard let cap = maxBandwidth.map(Int64.init) else { return choices.first }
    if let best = choices.filter({ bandwidth($0) <= cap }).max(by: { bandwidth($0) < bandwidth($1) }) {
      return best
    }
    return choices.min { bandwidth($0) < bandwidth($1) }
  }

  /// Reads and parses the playlist at `url` (at most `HLSPlaylist.maxPlaylistBytes`).
  private func playlist(_ url: String) async throws -> HLSPlaylist.Playlist {
    let limit = HLSPlaylist.maxPlaylistBytes
    let read = try await read(url, .bounded(0..<Int64(limit + 1)))
    if read.bytes.count > limit { throw HLSError.tooLarge(url: url, bytes: read.bytes.count, limit: limit) }
    guard let text = String(validating: read.bytes, as: UTF8.self), let playlistURL = URL(string: read.base)
    else {
      throw HLSError.notAPlaylist(url: url, firstLine: "(not UTF-8 text)")
    }
    return try HLSPlaylist.parse(text, playlistURL: playlistURL)
  }

  /// The bytes of `range` of `url` (fewer where the object ends), read at background priority.
  private func read(_ url: String, _ range: RequestedRange) async throws -> (
    bytes: [UInt8], length: Int64?, contentType: String?, base: String
  ) {
    let bytes = try await reader.read(url, range: range, priority: .background)
    defer { bytes.close() }
    var result: [UInt8] = []
    for try await piece in bytes { result += piece }
    // `base`: what relative references in the bytes resolve against (where a redirect led, as for a player).
    return (result, bytes.length, bytes.contentType, bytes.responseURL ?? url)
  }
}
