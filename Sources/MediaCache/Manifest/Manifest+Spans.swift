/// Spans: bytes of a chunk that is not present yet, kept with their CRC-32 so that a range a player asked for
/// inside a chunk is fetched once, not rounded out to the whole chunk (manifest version 1.1, `docs/FORMAT.md`
/// section 3.7).
///
/// Within a chunk the spans are ascending, disjoint and never touching (touching spans are joined with
/// `crc32_combine`); a chunk's spans are dropped when the chunk becomes present, and spans that come to cover
/// the whole chunk make it present.
extension Manifest {
  /// A run of bytes of one incomplete chunk, at absolute object offsets, with the CRC-32 of exactly those bytes.
  public struct Span: Sendable, Equatable {
    /// The bytes, as object offsets (inside one chunk).
    public var range: Range<Int64>
    /// The CRC-32 of the bytes.
    public var crc: UInt32

    /// A span of `range` whose bytes have checksum `crc`.
    public init(range: Range<Int64>, crc: UInt32) {
      self.range = range
      self.crc = crc
    }
  }

  /// Records `span` (inside one chunk that is not present). A span already recorded that holds it makes it a
  /// no-op; recorded spans it overlaps in part are replaced by it (their bytes were rewritten); touching spans
  /// are joined. Returns the chunk's CRC when the spans now cover the chunk: it is then present.
  @discardableResult
  package mutating func addSpan(_ span: Span) -> UInt32? {
    guard !span.range.isEmpty else { return nil }
    let index = Int(span.range.lowerBound / Int64(chunkSize))
    guard !isPresent(index), Int((span.range.upperBound - 1) / Int64(chunkSize)) == index else { return nil }
    var list = spans[index] ?? []
    if list.contains(where: {
      $0.range.lowerBound <= span.range.lowerBound && $0.range.upperBound >= span.range.upperBound
    }) {
      return nil
    }
    list.removeAll { $0.range.overlaps(span.range) }
    let at = list.firstIndex { $0.range.lowerBound > span.range.lowerBound } ?? list.count
    list.insert(span, at: at)
    var joined: [Span] = []
    for next in list {
      if let last = joined.last, last.range.upperBound == next.range.lowerBound {
        joined[joined.count - 1] = Span(
          range: last.range.lowerBound..<next.range.upperBound,
          crc: CRC32.combine(last.crc, next.crc, lengthOfB: Int64(next.range.count)))
      } else {
        joined.append(next)
      }
    }
    let chunk = byteRange(ofChunk: index)
    if joined.count == 1, joined[0].range == chunk {
      setChunk(index, crc: joined[0].crc)
      return joined[0].crc
    }
    spans[index] = joined
    return nil
  }

  /// Forgets `span` if it is recorded exactly so (it failed its CRC on read).
  package mutating func removeSpan(_ span: Span) {
    let index = Int(span.range.lowerBound / Int64(chunkSize))
    guard var list = spans[index] else { return }
    list.removeAll { $0 == span }
    spans[index] = list.isEmpty ? nil : list
  }

  /// Forgets the spans of chunk `index`.
  package mutating func removeSpans(ofChunk index: Int) { spans[index] = nil }

  /// Fits the spans to `length`, learned after they were recorded: spans reaching past it are forgotten, and a
  /// span that turns out to be a whole (last) chunk makes that chunk present.
  package mutating func fitSpans(toLength length: Int64) {
    for (index, list) in spans {
      let kept = list.filter { $0.range.upperBound <= length }
      spans[index] = kept.isEmpty ? nil : kept
      if kept.count == 1, contentLength == length, kept[0].range == byteRange(ofChunk: index) {
        setChunk(index, crc: kept[0].crc)
      }
    }
  }

  /// Every span, ordered by offset.
  public var allSpans: [Span] {
    spans.keys.sorted().flatMap { spans[$0]! }
  }

  /// The recorded span holding byte `position`, if any.
  public func span(containing position: Int64) -> Span? {
    spans[Int(position / Int64(chunkSize))]?.first { $0.range.contains(position) }
  }

  /// How many bytes from `position` on are cached without a gap, at most to the end of the chunk holding it
  /// (0 if the byte at `position` is not cached).
  public func cachedRun(at position: Int64) -> Int64 {
    let index = Int(position / Int64(chunkSize))
    if isPresent(index) { return max(0, byteRange(ofChunk: index).upperBound - position) }
    return span(containing: position).map { $0.range.upperBound - position } ?? 0
  }

  /// The first cached byte at or after `position` (in a present chunk or a span), if any before `limit`.
  public func nextCachedByte(from position: Int64, before limit: Int64) -> Int64? {
    let index = Int(position / Int64(chunkSize))
    var best: Int64?
    if isPresent(index) {
      best = position
    } else if let span = spans[index]?.first(where: { $0.range.upperBound > position }) {
      best = max(position, span.range.lowerBound)
    } else {
      if let next = chunkCRCs.keys.lazy.filter({ $0 > index }).min() { best = Int64(next) * Int64(chunkSize) }
      if let next = spans.keys.lazy.filter({ $0 > index }).min(), let first = spans[next]?.first {
        best = min(best ?? .max, first.range.lowerBound)
      }
    }
    return best.flatMap { $0 < limit ? $0 : nil }
  }
}
