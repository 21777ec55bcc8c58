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
/// tables is linear in their entries. A fragmented file (`mvex`, samples in `moof` boxes) throws
/// `MP4Error.fragmented`; the caller falls back to an estimate (`estimatedRange`).
public enum MP4StartRanges {
  /// The largest `moov` read (a two-hour film's is a few MiB).
  public static let maxMovieBoxBytes: Int64 = 64 << 20
  /// The most top-level boxes whose headers are read looking for `moov`.
  public static let maxTopLevelBoxes = 1024

  /// What to read to play the first seconds.
  public struct Plan: Sendable, Equatable {
    /// Sorted, disjoint byte ranges (adjacent ones merged): the head boxes, `moov`, and the samples.
    public var ranges: [Range<Int64>]
    /// Where `moov` lies.
    public var movieBox: Range<Int64>
    /// The movie's duration in seconds, where `mvhd` says one.
    public var duration: Double?

    /// How many bytes the ranges hold.
    public var byteCount: Int64 { ranges.reduce(0) { $0 + Int64($1.count) } }
  }

  /// The plan for the first `seconds` of the file at `url`, `fileLength` bytes long, read through `read`
  /// (which returns the bytes of a range, fewer only where the file ends).
  ///
  /// - Throws: what `read` throws, and `MP4Error` (see `BoxScan.feed(header:)` and `BoxScan.plan`).
  public static func plan(
    seconds: Double, url: String, fileLength: Int64, read: (Range<Int64>) async throws -> [UInt8]
  ) async throws -> Plan {
    var scan = BoxScan(url: url, fileLength: fileLength)
    var step = scan.first
    while true {
      switch step {
      case .readHeader(let offset, let length):
        step = try scan.feed(header: try await read(offset..<offset + Int64(length)))
      case .readMovie(let range):
        return try scan.plan(seconds: seconds, movieBytes: try await read(range))
      }
    }
  }

  /// Finds `moov` by reading top-level box headers, then plans from its bytes: a state machine that says
  /// which bytes to read next and is fed them, so a caller can drive it with any reads, synchronous or not.
  public struct BoxScan: Sendable {
    /// What to read next.
    public enum Step: Sendable, Equatable {
      /// Read `length` bytes at `offset` (fewer only where the file ends) and `feed` them.
      case readHeader(offset: Int64, length: Int)
      /// `moov` is `range`: read it whole and pass its bytes to `plan(seconds:movieBytes:)`.
      case readMovie(range: Range<Int64>)
    }

    /// Top-level boxes up to this size but `mdat` are part of the head a player reads whole (`ftyp`, `free`,
    /// ...); of `mdat` and of a larger box only the header is read.
    static let smallBoxBytes: Int64 = 4096
    /// How many bytes are read for a box header (enough for a 64-bit size and a `uuid` type).
    static let headerBytes: Int64 = 32

    let url: String
    let fileLength: Int64
    private var offset: Int64 = 0
    private var boxes = 0
    /// What a player reads of the boxes before `moov`: the small ones but `mdat` whole, the headers of the
    /// others.
    private var head: [Range<Int64>] = []
    private var movie: Range<Int64>?

    /// A scan of the file at `url`, `fileLength` bytes long.
    public init(url: String, fileLength: Int64) {
      self.url = url
      self.fileLength = fileLength
    }

    /// The first read: the header of the first box.
    public var first: Step { .readHeader(offset: 0, length: Int(min(Self.headerBytes, fileLength))) }

    /// The next step, given the bytes read for the previous `readHeader` step.
    ///
    /// - Throws: `MP4Error.invalidBox` for a bad header, `.noMovieBox` at the end of the file or past
    ///   `maxTopLevelBoxes`, `.tooLarge` for a `moov` above `maxMovieBoxBytes`.
    public mutating func feed(header bytes: [UInt8]) throws(MP4Error) -> Step {
      precondition(movie == nil, "feed after moov was found")
      let box = try MP4Box.header(in: bytes, base: offset, at: offset, containerEnd: fileLength, url: url)
      boxes += 1
      if box.type == "moov" {
        guard box.end - box.start <= maxMovieBoxBytes else {
          throw MP4Error(
            url: url, kind: .tooLarge(type: "moov", bytes: box.end - box.start, limit: maxMovieBoxBytes))
        }
        movie = box.start..<box.end
        return .readMovie(range: box.start..<box.end)
      }
      let whole = box.type != "mdat" && box.end - box.start <= Self.smallBoxBytes
      head.append(box.start..<(whole ? box.end : box.payloadStart))
      offset = box.end
      guard fileLength - offset >= 8, boxes < maxTopLevelBoxes else {
        throw MP4Error(url: url, kind: .noMovieBox)
      }
      return .readHeader(offset: offset, length: Int(min(Self.headerBytes, fileLength - offset)))
    }

    /// The plan for the first `seconds` of every track, from the bytes of `moov` (the `readMovie` step).
    ///
    /// - Throws: `MP4Error.invalidBox`, `.invalidTable`, `.fragmented`.
    public func plan(seconds: Double, movieBytes bytes: [UInt8]) throws(MP4Error) -> Plan {
      precondition(seconds >= 0 && seconds.isFinite, "seconds must be finite and not negative")
      guard let movie else { preconditionFailure("plan before moov was found") }
      guard Int64(bytes.count) == movie.upperBound - movie.lowerBound else {
        throw MP4Error(
          url: url,
          kind: .invalidBox(
            type: "moov", offset: movie.lowerBound,
            reason: "\(bytes.count) of its \(movie.count) bytes were read"))
      }
      let header = try MP4Box.header(
        in: bytes, base: movie.lowerBound, at: movie.lowerBound, containerEnd: movie.upperBound, url: url)
      let parsed = try MP4Movie.parse(bytes, movie: header, url: url)
      let sampleCount = parsed.tracks.reduce(0) { $0 + $1.sampleCount }
      if parsed.hasFragments && sampleCount == 0 { throw MP4Error(url: url, kind: .fragmented) }
      var samples: [Range<Int64>] = []
      for track in parsed.tracks {
        let count = track.sampleCount(before: seconds)
        samples += try track.byteRanges(ofFirst: count, fileLength: fileLength, url: url)
      }
      var ranges = head + [movie] + samples
      // moov at the head: a player reads on from its end into the boxes after it (`free`, mdat's header) up to
      // the first sample; so are those bytes, when they are few.
      if let first = samples.map(\.lowerBound).min(), first > movie.upperBound,
        first - movie.upperBound <= Self.smallBoxBytes
      {
        ranges.append(movie.upperBound..<first)
      }
      return Plan(ranges: MP4StartRanges.merged(ranges), movieBox: movie, duration: parsed.duration)
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
