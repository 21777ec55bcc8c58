/// A segment index (`sidx`, ISO/IEC 14496-12 §8.16.3): where a file's subsegments lie and when each starts.
/// A DASH representation addressed by `SegmentBase` has one in its `indexRange`; a player reads it to find the
/// bytes of the first seconds.
public struct MP4SegmentIndex: Sendable, Equatable {
  /// One subsegment (or, for a reference to another index, the bytes that index covers).
  public struct Reference: Sendable, Equatable {
    /// Its bytes in the file.
    public var range: Range<Int64>
    /// When it starts, in seconds from the first subsegment (the durations before it; the index's earliest
    /// presentation time is not added).
    public var start: Double
    /// How long it plays, in seconds.
    public var duration: Double
  }

  /// The subsegments, in file order.
  public var references: [Reference]

  /// The most references read from one index: more is not a file any player reads.
  public static let maxReferences = 1 << 16

  /// The first `sidx` among the top-level boxes of `bytes`, which hold the file from offset `base` on (a DASH
  /// `indexRange`). The first subsegment starts just past the `sidx`, plus its `first_offset`.
  ///
  /// - Throws: `MP4Error.invalidBox` for a box header that does not fit, or (type `sidx`) when there is no
  ///   `sidx`; `.invalidTable` for a `sidx` cut short, with a time scale of 0, more than `maxReferences`
  ///   references, or a reference past the end of the file (`fileLength`, when known).
  public static func parse(_ bytes: [UInt8], base: Int64, fileLength: Int64?, url: String) throws(MP4Error)
    -> MP4SegmentIndex
  {
    let boxes = try MP4Box.children(of: base..<base + Int64(bytes.count), in: bytes, base: base, url: url)
    guard let box = boxes.first(where: { $0.type == "sidx" }) else {
      throw MP4Error(
        url: url,
        kind: .invalidBox(type: "sidx", offset: base, reason: "the index range holds no 'sidx' box"))
    }
    func invalid(_ reason: String) -> MP4Error {
      MP4Error(url: url, kind: .invalidTable(track: 0, box: "sidx", reason: reason))
    }
    var reader = MP4FieldReader(box, in: bytes, base: base)
    let short = invalid("the box is cut short")
    func u16() throws(MP4Error) -> UInt16 {
      do { return try reader.u16() } catch { throw short }
    }
    func u32() throws(MP4Error) -> UInt32 {
      do { return try reader.u32() } catch { throw short }
    }
    func u64() throws(MP4Error) -> UInt64 {
      do { return try reader.u64() } catch { throw short }
    }
    let version = UInt8(try u32() >> 24)
    _ = try u32()  // reference_ID
    let timescale = try u32()
    guard timescale > 0 else { throw invalid("its time scale is 0") }
    let earliest = version == 0 ? UInt64(try u32()) : try u64()
    let firstOffset = version == 0 ? UInt64(try u32()) : try u64()
    _ = try u16()  // reserved
    let count = Int(try u16())
    guard count <= maxReferences else { throw invalid("\(count) references, more than \(maxReferences)") }
    guard firstOffset <= UInt64(Int64.max - box.end) else {
      throw invalid("its first offset is out of range")
    }
    var references: [Reference] = []
    var offset = box.end + Int64(firstOffset)
    // Times from the first subsegment: an index of a stream cut from a live one starts far from 0, and the
    // first seconds are the first subsegments whatever their presentation times.
    _ = earliest
    var time = 0.0
    for _ in 0..<count {
      let size = Int64(try u32() & 0x7FFF_FFFF)
      let duration = Double(try u32())
      _ = try u32()  // starts_with_SAP, SAP_type, SAP_delta_time
      guard offset <= Int64.max - size else {
        throw invalid("reference \(references.count) ends out of range")
      }
      let end = offset + size
      if let fileLength, end > fileLength {
        throw invalid("reference \(references.count) ends at \(end), past the file's \(fileLength) bytes")
      }
      references.append(
        Reference(
          range: offset..<end, start: time / Double(timescale), duration: duration / Double(timescale)))
      offset = end
      time += duration
    }
    return MP4SegmentIndex(references: references)
  }

  /// The byte ranges of the subsegments that start before `seconds` (at least the first).
  public func ranges(before seconds: Double) -> [Range<Int64>] {
    var result: [Range<Int64>] = []
    for (index, reference) in references.enumerated() where index == 0 || reference.start < seconds {
      if let last = result.last, last.upperBound == reference.range.lowerBound {
        result[result.count - 1] = last.lowerBound..<reference.range.upperBound
      } else {
        result.append(reference.range)
      }
    }
    return result
  }
}
