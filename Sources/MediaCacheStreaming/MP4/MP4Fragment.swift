/// What a `moof` box (ISO/IEC 14496-12 §8.8) says about when its samples start.
enum MP4Fragment {
  /// The earliest decoding time in seconds of the fragment `moof` (its bytes are `bytes`), over its track
  /// fragments: each `traf`'s `tfdt` base media decode time less its track's first edit, in its track's time
  /// scale. Nil when no track fragment of a known track has a `tfdt` (the time is not said).
  ///
  /// - Throws: `MP4Error.invalidBox` for a child box that does not fit, `.invalidTable` for a `tfhd` or `tfdt`
  ///   cut short.
  static func startTime(_ bytes: [UInt8], moof: MP4Box, movie: MP4Movie, url: String) throws(MP4Error)
    -> Double?
  {
    var earliest: Double?
    let base = moof.start
    for traf in try MP4Box.children(of: moof.payloadStart..<moof.end, in: bytes, base: base, url: url)
    where traf.type == "traf" {
      let children = try MP4Box.children(of: traf.payloadStart..<traf.end, in: bytes, base: base, url: url)
      var trackID: UInt32?
      var decodeTime: UInt64?
      for child in children {
        var reader = MP4FieldReader(child, in: bytes, base: base)
        do throws(MP4FieldReader.Short) {
          switch child.type {
          case "tfhd":
            _ = try reader.versionAndFlags()
            trackID = try reader.u32()
          case "tfdt":
            let (version, _) = try reader.versionAndFlags()
            decodeTime = version == 1 ? try reader.u64() : UInt64(try reader.u32())
          default: break
          }
        } catch {
          throw MP4Error(
            url: url,
            kind: .invalidTable(track: trackID ?? 0, box: child.type, reason: "the box is cut short"))
        }
      }
      guard let trackID, let decodeTime, let track = movie.tracks.first(where: { $0.id == trackID }),
        track.timescale > 0
      else { continue }
      let start = (Double(decodeTime) - Double(track.mediaStart)) / Double(track.timescale)
      earliest = min(earliest ?? start, start)
    }
    return earliest
  }
}
