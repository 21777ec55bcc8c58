extension MP4Movie.Track {
  /// How many samples, from the first, have a decoding time before `seconds` of presentation: every sample
  /// a player decodes to show the first `seconds` (a sample's presentation time is not before its decoding
  /// time, so the samples shown before `seconds` are among them). Samples before the track's `mediaStart`
  /// count too (they lie before the first presented one in the file's order).
  ///
  /// O(number of `stts` entries): a run of samples is counted by division, never sample by sample.
  func sampleCount(before seconds: Double) -> Int {
    guard timescale > 0 else { return 0 }
    let ticks = (seconds * Double(timescale)).rounded(.up)
    let limit = mediaStart.addingReportingOverflow(ticks >= Double(Int64.max) ? Int64.max : Int64(ticks))
    let end = limit.overflow ? Int64.max : limit.partialValue
    var time: Int64 = 0
    var count = 0
    for run in timeToSample {
      guard time < end else { break }
      let delta = Int64(run.delta)
      // Samples of duration 0 share one time: all of them, or none.
      let taken = delta == 0 ? Int64(run.count) : min(Int64(run.count), (end - time - 1) / delta + 1)
      count = min(count + Int(taken), sampleCount)
      if taken < Int64(run.count) { break }
      let (duration, overflow) = Int64(run.count).multipliedReportingOverflow(by: delta)
      let (next, overflowAgain) = time.addingReportingOverflow(duration)
      time = overflow || overflowAgain ? Int64.max : next
    }
    return min(count, sampleCount)
  }

  /// The byte ranges of samples `0..<count`: one range per chunk (ISO/IEC 14496-12 §8.7.4: a chunk is a
  /// contiguous run of samples), in chunk order.
  ///
  /// O(chunks touched + `count` when sample sizes are listed).
  ///
  /// - Throws: `MP4Error.invalidTable` when the tables contradict each other (a chunk without an offset, fewer
  ///   sizes than samples, an `stsc` that does not start at chunk 1 or goes backwards, a chunk of 0 samples)
  ///   or a sample lies past `fileLength`.
  func byteRanges(ofFirst count: Int, fileLength: Int64, url: String) throws(MP4Error) -> [Range<Int64>] {
    func invalid(_ box: String, _ reason: String) -> MP4Error {
      MP4Error(url: url, kind: .invalidTable(track: id, box: box, reason: reason))
    }
    guard count > 0 else { return [] }
    guard let first = sampleToChunk.first, first.firstChunk == 1 else {
      throw invalid("stsc", "its first entry does not start at chunk 1")
    }
    var ranges: [Range<Int64>] = []
    var taken = 0
    var entry = 0
    var chunk = 0
    while taken < count {
      // Chunk numbers in stsc are 1-based; the entry in force is the last whose first chunk is not after this.
      while entry + 1 < sampleToChunk.count, Int64(sampleToChunk[entry + 1].firstChunk) <= Int64(chunk) + 1 {
        guard sampleToChunk[entry + 1].firstChunk > sampleToChunk[entry].firstChunk else {
          throw invalid("stsc", "its chunk numbers do not increase")
        }
        entry += 1
      }
      let perChunk = Int(sampleToChunk[entry].samplesPerChunk)
      guard perChunk > 0 else { throw invalid("stsc", "a chunk of 0 samples") }
      guard chunk < chunkOffsets.count else {
        throw invalid(
          "stco",
          "sample \(taken) lies in chunk \(chunk + 1), but only \(chunkOffsets.count) chunks have an offset")
      }
      let samples = min(perChunk, count - taken)
      var bytes: Int64
      if constantSampleSize > 0 {
        // At most 2^32 samples of 2^32 bytes: past Int64, and past any file's end.
        let (product, overflow) = Int64(samples).multipliedReportingOverflow(by: Int64(constantSampleSize))
        bytes = overflow ? Int64.max : product
      } else {
        guard taken + samples <= sampleSizes.count else {
          throw invalid("stsz", "it lists \(sampleSizes.count) sizes for more samples")
        }
        bytes = sampleSizes[taken..<taken + samples].reduce(0) { $0 + Int64($1) }
      }
      let start = chunkOffsets[chunk]
      guard start <= fileLength, bytes <= fileLength - start else {
        throw invalid(
          "stco",
          "chunk \(chunk + 1) (\(bytes) bytes at offset \(start)) reaches past the file's end at \(fileLength)"
        )
      }
      if bytes > 0 { ranges.append(start..<start + bytes) }
      taken += samples
      chunk += 1
    }
    return ranges
  }
}
