import Foundation

/// The byte ranges of an MP4 (or QuickTime) file that a player reads to start playing its first seconds:
/// the boxes before `moov` (`ftyp`, ...), `moov` itself, and the samples of every track up to that time, so
/// that a preload of "5 seconds" fetches what playback will ask for, not a guess in bytes.
///
/// The file is read through `read` (a cache's range reads): the top-level box headers one by one until `moov`
/// (at the head, or at the tail after `mdat`, found by `mdat`'s size without reading it), then `moov`, whose
/// sample tables give the ranges (`stts`, `stsc`, `stsz`/`stz2`, `stco`/`co64`, the first edit of `elst`).
///
/// Bounded whatever the file says: at most `maxTopLevelBoxes` headers are read, `moov` is refused above
/// `maxMovieBoxBytes`, every table's entry count is checked against its box's size, and the walk of the
/// tables is linear in their entries.
///
/// A fragmented file (`mvex` in `moov`, the samples in `moof`/`mdat` pairs after it) is planned by its
/// fragments: `moov`, then each `moof` (read whole, at most `maxFragmentBoxBytes`) and the `mdat` after it for
/// as long as a track's first decoding time in the fragment (`tfdt`) is before the time. A fragment without
/// `tfdt` throws `MP4Error.fragmented`; the caller falls back to an estimate (`estimatedRange`).
public enum MP4StartRanges {
  /// The largest `moov` read (a two-hour film's is a few MiB).
  public static let maxMovieBoxBytes: Int64 = 64 << 20
  /// The most top-level boxes whose headers are read looking for `moov` and then the fragments.
  public static let maxTopLevelBoxes = 1024
  /// The largest `moof` read.
  public static let maxFragmentBoxBytes: Int64 = 16 << 20

  /// What to read to play the first seconds.
  public struct Plan: Sendable, Equatable {
    /// Sorted, disjoint byte ranges (adjacent ones merged): the head boxes, `moov`, and the samples.
    public var ranges: [Range<Int64>]
    /// Where `moov` lies.
    public var movieBox: Range<Int64>
    /// The movie's duration in seconds, where `mvhd` says one.
    public var duration: Double?
    /// Whether the samples came from fragments (`moof`/`mdat`, whole) rather than `moov`'s sample tables.
    public var isFragmented = false

    /// How many bytes the ranges hold.
    public var byteCount: Int64 { ranges.reduce(0) { $0 + Int64($1.count) } }
  }

  /// The plan for the first `seconds` of the file at `url`, `fileLength` bytes long, read through `read`
  /// (which returns the bytes of a range, fewer only where the file ends).
  ///
  /// - Throws: what `read` throws, and `MP4Error` (see `BoxScan.feed(_:)`).
  public static func plan(
    seconds: Double, url: String, fileLength: Int64, read: (Range<Int64>) async throws -> [UInt8]
  ) async throws -> Plan {
    var scan = BoxScan(url: url, fileLength: fileLength, seconds: seconds)
    var step = scan.first
    while true {
      switch step {
      case .read(let range): step = try scan.feed(try await read(range))
      case .done(let plan): return plan
      }
    }
  }

  /// The top-level box types an MP4 or QuickTime file starts with in practice.
  static let leadingBoxTypes: Set<String> = [
    "ftyp", "moov", "mdat", "free", "skip", "wide", "styp", "sidx", "pdin",
  ]

  /// Whether `head` (the file's first bytes, at least 8) starts like an MP4 or QuickTime file: a box of a type
  /// such a file starts with. A cheap test before reading more.
  public static func mayBeMP4(_ head: [UInt8]) -> Bool {
    head.count >= 8 && leadingBoxTypes.contains(MP4Box.fourCC(head, at: 4))
  }

  /// The first `seconds` estimated from the bitrate, for a file whose tables cannot be used: `fileLength`
  /// divided by `duration`, or `bitsPerSecond` where the duration is not known, from the file's start.
  public static func estimatedRange(
    seconds: Double, fileLength: Int64, duration: Double?, bitsPerSecond: Double
  ) -> Range<Int64> {
    let bytesPerSecond = duration.map { $0 > 0 ? Double(fileLength) / $0 : 0 } ?? bitsPerSecond / 8
    let bytes = (bytesPerSecond * seconds).rounded(.up)
    return 0..<(bytes >= Double(fileLength) ? fileLength : Int64(max(0, bytes)))
  }

  /// Sorted, with overlapping and adjacent ranges joined and empty ones dropped.
  static func merged(_ ranges: [Range<Int64>]) -> [Range<Int64>] {
    var result: [Range<Int64>] = []
    for range in ranges.filter({ !$0.isEmpty }).sorted(by: { $0.lowerBound < $1.lowerBound }) {
      if let last = result.last, range.lowerBound <= last.upperBound {
        result[result.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
      } else {
        result.append(range)
      }
    }
    return result
  }
}
