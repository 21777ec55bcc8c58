// libFuzzer target for the MP4 start planner (`MP4StartRanges.BoxScan`, sample tables and fragments,
// `estimatedRange`).
// Built and run by `tools/fuzz/run mp4`; see tools/fuzz/README.md.
//
// The input is a whole file. The scan is driven with synchronous reads of the input, as `MP4StartRanges.plan`
// drives it with a cache's reads, for 0 s, 0.15 s and 10^6 s. Each step must return or throw an `MP4Error`
// whose description is one line (never trap), and:
//   1. the scan asks only for bytes inside the file, a header read is at most 32 bytes, a box is read whole
//      only right after its header was, at most `maxMovieBoxBytes`, and it ends (a plan or an error) within
//      `2 * maxTopLevelBoxes + 1` reads;
//   2. a plan's ranges are sorted, non-empty, disjoint and not adjacent, inside the file, and hold `moov`
//      (the range the scan named) and the file's first 8 bytes;
//   3. a longer time never plans fewer bytes, and every range planned for a shorter time lies inside the
//      ranges for a longer one;
//   4. `estimatedRange` lies inside the file for any duration the plan reports;
//   5. the input read as a DASH index range (`MP4SegmentIndex.parse`, with and without the file's length)
//      gives references inside the file when its length is given, with starts that never go back, and
//      `ranges(before:)` sorted and disjoint.
// A violated property ends in `fatalError`, which libFuzzer reports as a crash and saves the input.

import MediaCacheStreaming

/// libFuzzer's entry point: runs one input (`size` bytes at `data`) and returns 0; a violated property traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let file = Array(UnsafeBufferPointer(start: data, count: size))
  checkSegmentIndex(file)
  var previous: MP4StartRanges.Plan?
  for seconds in [0, 0.15, 1e6] {
    guard let plan = plan(file, seconds: seconds) else { return 0 }
    check(plan, in: file)
    if let previous {
      if plan.byteCount < previous.byteCount {
        fatalError("\(seconds) s plans fewer bytes than a shorter time")
      }
      for range in previous.ranges where !plan.ranges.contains(where: { $0.clamped(to: range) == range }) {
        fatalError("\(range) planned for a shorter time is not planned for \(seconds) s")
      }
    }
    previous = plan
    let estimate = MP4StartRanges.estimatedRange(
      seconds: seconds, fileLength: Int64(size), duration: plan.duration, bitsPerSecond: 1e6)
    if estimate.lowerBound != 0 || estimate.upperBound > Int64(size) { fatalError("estimate \(estimate)") }
  }
  return 0
}

/// The plan for `seconds` of `file`, read synchronously; nil when the scan throws.
func plan(_ file: [UInt8], seconds: Double) -> MP4StartRanges.Plan? {
  let length = Int64(file.count)
  var scan = MP4StartRanges.BoxScan(url: "u", fileLength: length, seconds: seconds)
  var step = scan.first
  var reads = 0
  var previous: Range<Int64>?
  do {
    while true {
      switch step {
      case .read(let range):
        reads += 1
        let header = range.count <= 32
        let box = MP4StartRanges.maxMovieBoxBytes
        guard reads <= 2 * MP4StartRanges.maxTopLevelBoxes + 1, range.lowerBound >= 0,
          range.upperBound <= length, header || range.count <= box
        else { fatalError("read \(range) (read \(reads)) of a \(length)-byte file") }
        // Forward only: a box is read whole only at the header read before it.
        if let previous, !header, range.lowerBound != previous.lowerBound {
          fatalError("box \(range) read without its header at \(previous)")
        }
        previous = range
        step = try scan.feed(Array(file[Int(range.lowerBound)..<Int(range.upperBound)]))
      case .done(let plan):
        return plan
      }
    }
  } catch {
    let text = error.description
    if text.isEmpty || text.contains("\n") { fatalError("bad error description: \(text.debugDescription)") }
    return nil
  }
}

func check(_ plan: MP4StartRanges.Plan, in file: [UInt8]) {
  var end: Int64 = -1
  for range in plan.ranges {
    if range.isEmpty || range.lowerBound <= end || range.lowerBound < 0
      || range.upperBound > Int64(file.count)
    {
      fatalError("ranges not sorted, disjoint and inside the file: \(plan.ranges)")
    }
    end = range.upperBound
  }
  for needed in [plan.movieBox, 0..<8]
  where !plan.ranges.contains(where: { $0.clamped(to: needed) == needed }) {
    fatalError("\(needed) is not planned: \(plan.ranges)")
  }
}

/// Property 5: the input as a `sidx` at offset 0 of a file of its own length, and of an unknown length.
func checkSegmentIndex(_ file: [UInt8]) {
  for length in [Int64(file.count), nil] {
    do {
      let index = try MP4SegmentIndex.parse(file, base: 0, fileLength: length, url: "u")
      var start = -Double.infinity
      for reference in index.references {
        if let length, reference.range.upperBound > length {
          fatalError("reference \(reference.range) past \(length)")
        }
        if reference.start < start {
          fatalError("reference starts go back: \(reference.start) after \(start)")
        }
        start = reference.start
      }
      let ranges = index.ranges(before: 2)
      for (a, b) in zip(ranges, ranges.dropFirst()) where a.upperBound > b.lowerBound {
        fatalError("ranges \(a) and \(b) overlap or are out of order")
      }
    } catch {
      if "\(error)".contains("\n") { fatalError("a multi-line error: \(error)") }
    }
  }
}
