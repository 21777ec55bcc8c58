extension MP4StartRanges {
  /// Plans the first `seconds` of a file by reading it box by box: a state machine that says which bytes to
  /// read next and is fed them (so a caller can drive it with any reads, synchronous or not). Top-level box
  /// headers until `moov` (skipping `mdat` by its size), then `moov`; for a fragmented file, then the headers
  /// after it, each `moof` whole, until a fragment starts at or after the time.
  public struct BoxScan: Sendable {
    /// What to do next.
    public enum Step: Sendable, Equatable {
      /// Read `range` (fewer bytes only where the file ends) and `feed` them.
      case read(Range<Int64>)
      /// The plan is made.
      case done(Plan)
    }

    /// Top-level boxes up to this size but `mdat` are part of the head a player reads whole (`ftyp`, `free`,
    /// ...); of `mdat` and of a larger box only the header is read.
    static let smallBoxBytes: Int64 = 4096
    /// How many bytes are read for a box header (enough for a 64-bit size and a `uuid` type).
    static let headerBytes: Int64 = 32

    private enum Phase {
      /// Reading top-level headers, looking for `moov`.
      case findingMovie
      /// `moov`'s bytes are being read.
      case readingMovie(Range<Int64>)
      /// Reading top-level headers after `moov` of a fragmented file.
      case findingFragments(MP4Movie)
      /// A `moof`'s bytes are being read.
      case readingFragment(MP4Movie, MP4Box)
      case finished
    }

    let url: String
    let fileLength: Int64
    let seconds: Double
    private var phase = Phase.findingMovie
    private var offset: Int64 = 0
    private var boxes = 0
    /// What the plan holds so far: the head boxes, `moov`, the fragments.
    private var ranges: [Range<Int64>] = []
    private var movie: Range<Int64> = 0..<0
    /// The last `moof` was taken: so is the `mdat` after it.
    private var takeNextMediaData = false

    /// A scan of the file at `url`, `fileLength` bytes long, for its first `seconds`.
    public init(url: String, fileLength: Int64, seconds: Double) {
      precondition(seconds >= 0 && seconds.isFinite, "seconds must be finite and not negative")
      self.url = url
      self.fileLength = fileLength
      self.seconds = seconds
    }

    /// The first read: the header of the first box.
    public var first: Step { .read(0..<min(Self.headerBytes, fileLength)) }

    /// The next step, given the bytes read for the previous one.
    ///
    /// - Throws: `MP4Error.invalidBox` for a bad header or a box read short, `.noMovieBox` at the end of the
    ///   file or past `maxTopLevelBoxes` without `moov`, `.tooLarge` for a `moov` above `maxMovieBoxBytes` or
    ///   a `moof` above `maxFragmentBoxBytes`, `.invalidTable` for tables that contradict each other or point
    ///   past the file, `.fragmented` for a fragment whose time is not said.
    public mutating func feed(_ bytes: [UInt8]) throws(MP4Error) -> Step {
      switch phase {
      case .findingMovie:
        let box = try header(bytes)
        if box.type == "moov" {
          try check(box, limit: maxMovieBoxBytes)
          phase = .readingMovie(box.start..<box.end)
          return .read(box.start..<box.end)
        }
        let whole = box.type != "mdat" && box.end - box.start <= Self.smallBoxBytes
        ranges.append(box.start..<(whole ? box.end : box.payloadStart))
        offset = box.end
        guard let step = advance() else { throw MP4Error(url: url, kind: .noMovieBox) }
        return step
      case .readingMovie(let range):
        movie = range
        let box = try whole(bytes, range, type: "moov")
        let parsed = try MP4Movie.parse(bytes, movie: box, url: url)
        if parsed.hasFragments && parsed.tracks.allSatisfy({ $0.sampleCount == 0 }) {
          ranges.append(range)
          offset = range.upperBound
          phase = .findingFragments(parsed)
          return advance() ?? finish(parsed)
        }
        return .done(try samplePlan(parsed))
      case .findingFragments(let parsed):
        let box = try header(bytes)
        switch box.type {
        case "moof":
          try check(box, limit: maxFragmentBoxBytes)
          phase = .readingFragment(parsed, box)
          return .read(box.start..<box.end)
        case "mdat":
          if takeNextMediaData { ranges.append(box.start..<box.end) }
          takeNextMediaData = false
        default:
          // `styp`, `sidx`, `free` between fragments: read on the way, when small.
          if box.end - box.start <= Self.smallBoxBytes { ranges.append(box.start..<box.end) }
        }
        offset = box.end
        return advance() ?? finish(parsed)
      case .readingFragment(let parsed, let fragment):
        let box = try whole(bytes, fragment.start..<fragment.end, type: "moof")
        guard let start = try MP4Fragment.startTime(bytes, moof: box, movie: parsed, url: url) else {
          throw MP4Error(url: url, kind: .fragmented)
        }
        guard start < seconds else { return finish(parsed) }
        ranges.append(box.start..<box.end)
        takeNextMediaData = true
        phase = .findingFragments(parsed)
        offset = box.end
        return advance() ?? finish(parsed)
      case .finished:
        preconditionFailure("feed after the plan was made")
      }
    }

    /// The header at `offset`, read from `bytes`; counts it.
    private mutating func header(_ bytes: [UInt8]) throws(MP4Error) -> MP4Box {
      boxes += 1
      return try MP4Box.header(in: bytes, base: offset, at: offset, containerEnd: fileLength, url: url)
    }

    private func check(_ box: MP4Box, limit: Int64) throws(MP4Error) {
      guard box.end - box.start <= limit else {
        throw MP4Error(url: url, kind: .tooLarge(type: box.type, bytes: box.end - box.start, limit: limit))
      }
    }

    /// The box `range` read whole as `bytes`, its header parsed.
    private func whole(_ bytes: [UInt8], _ range: Range<Int64>, type: String) throws(MP4Error) -> MP4Box {
      guard Int64(bytes.count) == range.count else {
        throw MP4Error(
          url: url,
          kind: .invalidBox(
            type: type, offset: range.lowerBound,
            reason: "\(bytes.count) of its \(range.count) bytes were read"))
      }
      return try MP4Box.header(
        in: bytes, base: range.lowerBound, at: range.lowerBound, containerEnd: range.upperBound, url: url)
    }

    /// The header read at `offset`, or nil at the end of the file or past `maxTopLevelBoxes` headers.
    private mutating func advance() -> Step? {
      guard fileLength - offset >= 8, boxes < maxTopLevelBoxes else { return nil }
      return .read(offset..<offset + min(Self.headerBytes, fileLength - offset))
    }

    private mutating func finish(_ parsed: MP4Movie) -> Step {
      phase = .finished
      return .done(
        Plan(
          ranges: MP4StartRanges.merged(ranges), movieBox: movie, duration: parsed.duration,
          isFragmented: true))
    }

    /// The plan of a file whose samples are in `moov`'s tables: the head, `moov` and every track's samples
    /// decoded before the time.
    private mutating func samplePlan(_ parsed: MP4Movie) throws(MP4Error) -> Plan {
      phase = .finished
      var samples: [Range<Int64>] = []
      for track in parsed.tracks {
        let count = track.sampleCount(before: seconds)
        samples += try track.byteRanges(ofFirst: count, fileLength: fileLength, url: url)
      }
      var ranges = self.ranges + [movie] + samples
      // moov at the head: a player reads on from its end into the boxes after it (`free`, mdat's header) up to
      // the file's first chunk; so are those bytes, when they are few. (The first chunk of the file, not of
      // the samples planned: a plan for a longer time must hold every byte of a shorter one's.)
      if let first = parsed.tracks.compactMap(\.chunkOffsets.first).filter({ $0 >= movie.upperBound }).min(),
        first - movie.upperBound <= Self.smallBoxBytes, !samples.isEmpty
      {
        // A table may point past the end (a cut file: the fuzzer found one); what is planned stays inside.
        ranges.append(movie.upperBound..<min(first, fileLength))
      }
      return Plan(ranges: MP4StartRanges.merged(ranges), movieBox: movie, duration: parsed.duration)
    }
  }
}
