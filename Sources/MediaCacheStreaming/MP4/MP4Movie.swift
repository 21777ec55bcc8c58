/// What a `moov` box says about where the samples are: per track its time scale, the edit that starts its
/// presentation, and its sample tables (ISO/IEC 14496-12 §8.6–8.7), as far as mapping the first seconds of
/// each track to byte ranges needs them.
///
/// Parsed from the `moov` bytes alone, bounded: the walk descends only the fixed path
/// `moov > trak > mdia > minf > stbl` (and `trak > edts > elst`), and every table's entry count is checked
/// against the bytes of its box before anything is allocated.
struct MP4Movie: Sendable {
  /// One track's tables.
  struct Track: Sendable {
    var id: UInt32 = 0
    /// `vide`, `soun`, `text`, ... (from `hdlr`).
    var handler = ""
    /// Ticks per second of the media time line (from `mdhd`).
    var timescale: UInt32 = 0
    /// Media time where the presentation starts (the first edit of `elst` that is not empty), in ticks.
    var mediaStart: Int64 = 0
    /// `stts`: runs of samples of one duration.
    var timeToSample: [(count: UInt32, delta: UInt32)] = []
    /// `stsc`: from chunk `firstChunk` (1-based) on, `samplesPerChunk` samples per chunk.
    var sampleToChunk: [(firstChunk: UInt32, samplesPerChunk: UInt32)] = []
    /// `stsz`/`stz2`: the one size of every sample, or 0 when `sampleSizes` lists them.
    var constantSampleSize: UInt32 = 0
    var sampleSizes: [UInt32] = []
    var sampleCount = 0
    /// `stco`/`co64`: file offset of each chunk.
    var chunkOffsets: [Int64] = []
  }

  /// Ticks per second of the movie time line (from `mvhd`).
  var timescale: UInt32 = 0
  /// The movie's duration in seconds (from `mvhd`), when it says one.
  var duration: Double?
  var tracks: [Track] = []
  /// Whether `mvex` is present: the samples (or some) are in fragments after `moov`.
  var hasFragments = false

  /// Parses the `moov` box `movie`, whose bytes are `bytes` (from the box's first byte on).
  static func parse(_ bytes: [UInt8], movie: MP4Box, url: String) throws(MP4Error) -> MP4Movie {
    var result = MP4Movie()
    let base = movie.start
    for child in try MP4Box.children(of: movie.payloadStart..<movie.end, in: bytes, base: base, url: url) {
      switch child.type {
      case "mvhd":
        try result.readMovieHeader(child, bytes, base, url)
      case "trak":
        result.tracks.append(try readTrack(child, bytes, base, url))
      case "mvex":
        result.hasFragments = true
      default: break
      }
    }
    return result
  }

  private mutating func readMovieHeader(_ box: MP4Box, _ bytes: [UInt8], _ base: Int64, _ url: String)
    throws(MP4Error)
  {
    var reader = MP4FieldReader(box, in: bytes, base: base)
    do {
      let (version, _) = try reader.versionAndFlags()
      try reader.skip(version == 1 ? 16 : 8)
      timescale = try reader.u32()
      let ticks = version == 1 ? try reader.u64() : UInt64(try reader.u32())
      // All ones: the duration is not known.
      let unknown = version == 1 ? UInt64.max : UInt64(UInt32.max)
      if timescale > 0, ticks != unknown, ticks > 0 { duration = Double(ticks) / Double(timescale) }
    } catch {
      throw MP4Error(url: url, kind: .invalidBox(type: "mvhd", offset: box.start, reason: "cut short"))
    }
  }

  private static func readTrack(_ trak: MP4Box, _ bytes: [UInt8], _ base: Int64, _ url: String)
    throws(MP4Error) -> Track
  {
    var track = Track()
    // What a `Short` thrown below is about.
    var current = (box: "tkhd", reason: "the box is cut short")
    func children(_ box: MP4Box) throws(MP4Error) -> [MP4Box] {
      try MP4Box.children(of: box.payloadStart..<box.end, in: bytes, base: base, url: url)
    }
    func child(_ type: String, of box: MP4Box) throws(MP4Error) -> MP4Box {
      guard let found = try children(box).first(where: { $0.type == type }) else {
        throw MP4Error(
          url: url, kind: .invalidTable(track: track.id, box: box.type, reason: "it has no '\(type)' box"))
      }
      return found
    }
    // Two kinds of error below: an MP4Error about a box, and a Short read in the box named by `current`.
    do {
      let boxes = try children(trak)
      if let tkhd = boxes.first(where: { $0.type == "tkhd" }) {
        var reader = MP4FieldReader(tkhd, in: bytes, base: base)
        let (version, _) = try reader.versionAndFlags()
        try reader.skip(version == 1 ? 16 : 8)
        track.id = try reader.u32()
      }
      guard let mdia = boxes.first(where: { $0.type == "mdia" }) else {
        throw MP4Error(
          url: url, kind: .invalidTable(track: track.id, box: "trak", reason: "it has no 'mdia' box"))
      }
      let media = try children(mdia)
      current.box = "mdhd"
      let mdhd = try child("mdhd", of: mdia)
      var reader = MP4FieldReader(mdhd, in: bytes, base: base)
      let (mdhdVersion, _) = try reader.versionAndFlags()
      try reader.skip(mdhdVersion == 1 ? 16 : 8)
      track.timescale = try reader.u32()
      if let hdlr = media.first(where: { $0.type == "hdlr" }) {
        current.box = "hdlr"
        var reader = MP4FieldReader(hdlr, in: bytes, base: base)
        try reader.skip(8)
        let handler = try reader.u32()
        track.handler = MP4Box.fourCC(
          (0..<4).map { UInt8(truncatingIfNeeded: handler >> (24 - 8 * $0)) }, at: 0)
      }
      if let edts = boxes.first(where: { $0.type == "edts" }),
        let elst = try children(edts).first(where: { $0.type == "elst" })
      {
        current.box = "elst"
        track.mediaStart = try readEditList(elst, bytes, base)
      }
      let stbl = try child("stbl", of: try child("minf", of: mdia))
      try readSampleTables(stbl, into: &track, current: &current, bytes, base, url)
    } catch let error as MP4Error {
      throw error
    } catch {
      throw MP4Error(url: url, kind: .invalidTable(track: track.id, box: current.box, reason: current.reason))
    }
    return track
  }

  /// The media time of the first edit that is not empty (an empty edit, media time -1, delays the start of
  /// the presentation; the media needed for the first seconds then starts at the next edit's media time).
  private static func readEditList(_ elst: MP4Box, _ bytes: [UInt8], _ base: Int64)
    throws(MP4FieldReader.Short) -> Int64
  {
    var reader = MP4FieldReader(elst, in: bytes, base: base)
    let (version, _) = try reader.versionAndFlags()
    let count = try reader.count(ofEntries: version == 1 ? 20 : 12)
    for _ in 0..<count {
      let mediaTime: Int64
      if version == 1 {
        _ = try reader.u64()
        mediaTime = Int64(bitPattern: try reader.u64())
      } else {
        _ = try reader.u32()
        mediaTime = Int64(Int32(bitPattern: try reader.u32()))
      }
      _ = try reader.u32()
      if mediaTime >= 0 { return mediaTime }
    }
    return 0
  }

  private static func readSampleTables(
    _ stbl: MP4Box, into track: inout Track, current: inout (box: String, reason: String), _ bytes: [UInt8],
    _ base: Int64,
    _ url: String
  ) throws {
    let tables = try MP4Box.children(of: stbl.payloadStart..<stbl.end, in: bytes, base: base, url: url)
    for box in tables {
      current.box = box.type
      var reader = MP4FieldReader(box, in: bytes, base: base)
      switch box.type {
      case "stts":
        _ = try reader.versionAndFlags()
        let count = try reader.count(ofEntries: 8)
        track.timeToSample.reserveCapacity(count)
        for _ in 0..<count { track.timeToSample.append((try reader.u32(), try reader.u32())) }
      case "stsc":
        _ = try reader.versionAndFlags()
        let count = try reader.count(ofEntries: 12)
        track.sampleToChunk.reserveCapacity(count)
        for _ in 0..<count {
          track.sampleToChunk.append((try reader.u32(), try reader.u32()))
          _ = try reader.u32()
        }
      case "stsz":
        _ = try reader.versionAndFlags()
        track.constantSampleSize = try reader.u32()
        if track.constantSampleSize == 0 {
          let count = try reader.count(ofEntries: 4)
          track.sampleSizes.reserveCapacity(count)
          for _ in 0..<count { track.sampleSizes.append(try reader.u32()) }
          track.sampleCount = count
        } else {
          track.sampleCount = Int(try reader.u32())
        }
      case "stz2":
        _ = try reader.versionAndFlags()
        try reader.skip(3)
        let fieldSize = Int(try reader.u8())
        let count = Int(try reader.u32())
        guard [4, 8, 16].contains(fieldSize) else {
          current.reason = "its field size \(fieldSize) is not 4, 8 or 16"
          throw MP4FieldReader.Short()
        }
        guard count <= reader.remaining * 8 / fieldSize else { throw MP4FieldReader.Short() }
        track.sampleSizes.reserveCapacity(count)
        var index = 0
        while index < count {
          switch fieldSize {
          case 4:
            let byte = try reader.u8()
            track.sampleSizes.append(UInt32(byte >> 4))
            if index + 1 < count { track.sampleSizes.append(UInt32(byte & 0x0F)) }
            index += 2
          case 8:
            track.sampleSizes.append(UInt32(try reader.u8()))
            index += 1
          default:
            track.sampleSizes.append(UInt32(try reader.u16()))
            index += 1
          }
        }
        track.sampleCount = count
      case "stco", "co64":
        _ = try reader.versionAndFlags()
        let wide = box.type == "co64"
        let count = try reader.count(ofEntries: wide ? 8 : 4)
        track.chunkOffsets.reserveCapacity(count)
        for _ in 0..<count {
          // An offset past Int64.max is past any file's end, which the ranges check.
          track.chunkOffsets.append(Int64(clamping: wide ? try reader.u64() : UInt64(try reader.u32())))
        }
      default: break
      }
    }
  }
}
