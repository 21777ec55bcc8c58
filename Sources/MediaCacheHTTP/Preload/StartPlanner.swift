import Foundation
import Logging
import MediaCache
import MediaCacheStreaming

/// What to fetch so that a player can start an item and play its first seconds from the cache: the byte
/// ranges of an MP4's first seconds (its head boxes, `moov` and the samples, from `MP4StartRanges`), or, for a
/// file whose tables cannot be used, an estimate in bytes from the start.
///
/// The bytes it reads to decide (box headers, `moov`) are read through the `CachingReader` at background
/// priority, so they are cached too: the player reads them again to start.
public struct StartPlanner: Sendable {
  /// How the ranges were found.
  public enum Source: Sendable, Equatable {
    /// From the MP4's sample tables: exactly what a player reads for the first seconds (and the boxes before).
    case mp4SampleTables
    /// From the bitrate (`StartPlanner.fallbackBitsPerSecond`), from the start, because the
    /// tables could not be used: `reason` says why (an `MP4Error`'s description, or "not an MP4").
    case estimate(reason: String)
  }

  /// What to fetch for one item.
  public struct Plan: Sendable, Equatable {
    /// The object's URL.
    public var url: String
    /// Sorted, disjoint byte ranges.
    public var ranges: [Range<Int64>]
    /// How they were found.
    public var source: Source
    /// The object's length.
    public var length: Int64
    /// The media's duration in seconds, where the file says it.
    public var duration: Double?

    /// Bytes in `ranges`.
    public var byteCount: Int64 { ranges.reduce(0) { $0 + Int64($1.count) } }
  }

  let reader: CachingReader
  /// The bitrate assumed for a file whose duration is not known (default 4 Mbit/s).
  public var fallbackBitsPerSecond: Double
  let logger: Logger

  /// A planner reading through `reader`; `logger` gets one line per fallback, with its reason.
  public init(
    reader: CachingReader, fallbackBitsPerSecond: Double = 4_000_000,
    logger: Logger = Logger(label: "mediacache.preload")
  ) {
    precondition(fallbackBitsPerSecond > 0, "fallbackBitsPerSecond must be positive")
    self.reader = reader
    self.fallbackBitsPerSecond = fallbackBitsPerSecond
    self.logger = logger
  }

  /// The plan for the first `seconds` of the object at `url`.
  ///
  /// - Throws: `OriginError` and `StoreError` from the reads (an MP4 whose tables cannot be used is not an
  ///   error: it gets an estimate).
  public func plan(_ url: String, seconds: Double) async throws -> Plan {
    precondition(seconds >= 0 && seconds.isFinite, "seconds must be finite and not negative")
    let head = try await read(url, .bounded(0..<32))
    guard let length = head.length else {
      throw OriginError.inconsistentResponse(url: url, reason: "the origin gives no length")
    }
    guard length > 0 else {
      return Plan(url: url, ranges: [], source: .estimate(reason: "the object is empty"), length: 0)
    }
    let reason: String
    if MP4StartRanges.mayBeMP4(head.bytes) {
      do {
        let plan = try await MP4StartRanges.plan(seconds: seconds, url: url, fileLength: length) { range in
          try await read(url, .bounded(range)).bytes
        }
        return Plan(
          url: url, ranges: plan.ranges, source: .mp4SampleTables, length: length, duration: plan.duration)
      } catch let error as MP4Error {
        reason = error.description
      }
    } else {
      reason = "\(url): not an MP4 (no box type it knows in its first 8 bytes)"
    }
    logger.info("preload estimates bytes", metadata: ["url": "\(url)", "reason": "\(reason)"])
    let range = MP4StartRanges.estimatedRange(
      seconds: seconds, fileLength: length, duration: nil, bitsPerSecond: fallbackBitsPerSecond)
    return Plan(
      url: url, ranges: range.isEmpty ? [] : [range], source: .estimate(reason: reason), length: length)
  }

  /// The bytes of `range` of `url` (fewer where the object ends), read at background priority.
  private func read(_ url: String, _ range: RequestedRange) async throws -> (bytes: [UInt8], length: Int64?) {
    let bytes = try await reader.read(url, range: range, priority: .background)
    defer { bytes.close() }
    var result: [UInt8] = []
    for try await piece in bytes { result += piece }
    return (result, bytes.length)
  }
}
