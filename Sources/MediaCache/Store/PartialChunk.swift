/// Which bytes of one not-yet-complete chunk have been written, with the CRC of each contiguous run when the
/// runs were written without overlap.
struct PartialChunk: Sendable {
  /// Disjoint runs (offsets inside the chunk), ascending; adjacent runs are merged with `crc32_combine`.
  private(set) var runs: [(range: Range<Int64>, crc: UInt32?)] = []

  /// End of the last run.
  var end: Int64 { runs.last?.range.upperBound ?? 0 }

  /// The CRC of the chunk's first run when it is the only one and its CRC is known.
  var crc: UInt32? { runs.count == 1 && runs[0].range.lowerBound == 0 ? runs[0].crc : nil }

  /// Whether bytes `0..<length` are all written.
  func covers(_ length: Int64) -> Bool {
    runs.count == 1 && runs[0].range.lowerBound == 0 && runs[0].range.upperBound >= length
  }

  mutating func add(_ range: Range<Int64>, crc: UInt32) {
    var insertAt = runs.firstIndex { $0.range.lowerBound >= range.lowerBound } ?? runs.count
    runs.insert((range, crc), at: insertAt)
    // Merge with the left neighbour, then keep merging rightwards.
    if insertAt > 0 && runs[insertAt - 1].range.upperBound >= range.lowerBound { insertAt -= 1 }
    while insertAt + 1 < runs.count && runs[insertAt].range.upperBound >= runs[insertAt + 1].range.lowerBound
    {
      let left = runs[insertAt]
      let right = runs[insertAt + 1]
      let merged: UInt32?
      if left.range.upperBound == right.range.lowerBound, let a = left.crc, let b = right.crc {
        merged = CRC32.combine(a, b, lengthOfB: Int64(right.range.count))
      } else {
        merged = nil  // overlap: the bytes on disk decide
      }
      let upper = max(left.range.upperBound, right.range.upperBound)
      runs[insertAt] = (left.range.lowerBound..<upper, merged)
      runs.remove(at: insertAt + 1)
    }
  }
}
