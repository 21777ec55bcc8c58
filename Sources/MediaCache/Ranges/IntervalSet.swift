/// A set of integers stored as sorted, disjoint, non-adjacent half-open ranges.
///
/// `ChunkSet` (chunk indices) and `ByteRangeSet` (byte offsets) are the two uses. Every operation keeps the
/// canonical form, so two sets with the same members are equal and encode to the same bytes.
public struct IntervalSet<Bound: FixedWidthInteger & SignedInteger & Sendable>: Sendable, Hashable {
  /// The runs of members, ascending; no two touch or overlap and none is empty.
  public private(set) var ranges: [Range<Bound>]

  /// The empty set.
  public init() { ranges = [] }

  /// A set holding every member of `ranges` (in any order, overlapping or empty ranges allowed).
  public init(_ ranges: some Sequence<Range<Bound>>) {
    self.ranges = []
    for range in ranges { insert(range) }
  }

  /// A set from runs that are already canonical; returns nil if they are not.
  public init?(canonical ranges: [Range<Bound>]) {
    for (index, range) in ranges.enumerated() {
      if range.isEmpty { return nil }
      if index > 0 && ranges[index - 1].upperBound >= range.lowerBound { return nil }
    }
    self.ranges = ranges
  }

  /// True when the set has no member.
  public var isEmpty: Bool { ranges.isEmpty }

  /// The number of members.
  public var count: Bound { ranges.reduce(0) { $0 + Bound($1.count) } }

  /// The smallest range holding every member, or nil when empty.
  public var span: Range<Bound>? {
    guard let first = ranges.first, let last = ranges.last else { return nil }
    return first.lowerBound..<last.upperBound
  }

  /// Whether `value` is a member.
  public func contains(_ value: Bound) -> Bool {
    guard let index = firstIndex(endingAfter: value) else { return false }
    return ranges[index].contains(value)
  }

  /// Whether every member of `range` is a member of the set.
  public func contains(_ range: Range<Bound>) -> Bool {
    if range.isEmpty { return true }
    guard let index = firstIndex(endingAfter: range.lowerBound) else { return false }
    let run = ranges[index]
    return run.lowerBound <= range.lowerBound && range.upperBound <= run.upperBound
  }

  /// Adds one member.
  public mutating func insert(_ value: Bound) { insert(value..<(value + 1)) }

  /// Adds every member of `range`, merging with touching runs.
  public mutating func insert(_ range: Range<Bound>) {
    guard !range.isEmpty else { return }
    // First run that touches or follows `range`, last run that touches or precedes it.
    var low = range.lowerBound
    var high = range.upperBound
    let start =
      low == Bound.min ? 0 : (firstIndex(endingAfter: low - 1) ?? ranges.count)
    var end = start
    while end < ranges.count && ranges[end].lowerBound <= high {
      low = Swift.min(low, ranges[end].lowerBound)
      high = Swift.max(high, ranges[end].upperBound)
      end += 1
    }
    // In place where possible: one array literal per insert was one allocation per completed chunk.
    if end == start {
      ranges.insert(low..<high, at: start)
    } else {
      ranges[start] = low..<high
      if end > start + 1 { ranges.removeSubrange((start + 1)..<end) }
    }
  }

  /// Removes one member.
  public mutating func remove(_ value: Bound) { remove(value..<(value + 1)) }

  /// Removes every member of `range`.
  public mutating func remove(_ range: Range<Bound>) {
    guard !range.isEmpty else { return }
    var result: [Range<Bound>] = []
    result.reserveCapacity(ranges.count + 1)
    for run in ranges {
      if run.upperBound <= range.lowerBound || run.lowerBound >= range.upperBound {
        result.append(run)
        continue
      }
      if run.lowerBound < range.lowerBound { result.append(run.lowerBound..<range.lowerBound) }
      if run.upperBound > range.upperBound { result.append(range.upperBound..<run.upperBound) }
    }
    ranges = result
  }

  /// The members of `self` or `other`.
  public func union(_ other: IntervalSet) -> IntervalSet {
    var result = self
    for run in other.ranges { result.insert(run) }
    return result
  }

  /// The members of `self` that are not members of `other`.
  public func subtracting(_ other: IntervalSet) -> IntervalSet {
    var result = self
    for run in other.ranges { result.remove(run) }
    return result
  }

  /// The members of `self` that are also in `range`.
  public func intersection(_ range: Range<Bound>) -> IntervalSet {
    var result = IntervalSet()
    for run in ranges {
      let low = Swift.max(run.lowerBound, range.lowerBound)
      let high = Swift.min(run.upperBound, range.upperBound)
      if low < high { result.ranges.append(low..<high) }
    }
    return result
  }

  /// The runs inside `range` that are not members: what is still missing of a requested range.
  public func gaps(in range: Range<Bound>) -> [Range<Bound>] {
    var result: [Range<Bound>] = []
    var cursor = range.lowerBound
    for run in ranges where run.upperBound > range.lowerBound {
      if run.lowerBound >= range.upperBound { break }
      if run.lowerBound > cursor { result.append(cursor..<run.lowerBound) }
      cursor = Swift.max(cursor, run.upperBound)
      if cursor >= range.upperBound { break }
    }
    if cursor < range.upperBound { result.append(cursor..<range.upperBound) }
    return result
  }

  /// Every member, ascending.
  public var members: some Sequence<Bound> { ranges.lazy.flatMap { $0 } }

  /// Binary search: index of the first run whose upper bound is greater than `value`.
  private func firstIndex(endingAfter value: Bound) -> Int? {
    var low = 0
    var high = ranges.count
    while low < high {
      let mid = (low + high) / 2
      if ranges[mid].upperBound > value { high = mid } else { low = mid + 1 }
    }
    return low < ranges.count ? low : nil
  }

  /// Traps unless the runs are canonical; for tests.
  public func checkInvariants() {
    for (index, run) in ranges.enumerated() {
      precondition(!run.isEmpty, "empty run at \(index)")
      if index > 0 { precondition(ranges[index - 1].upperBound < run.lowerBound, "runs touch at \(index)") }
    }
  }
}

/// A set of chunk indices: which chunks of an object are present.
public typealias ChunkSet = IntervalSet<Int>

/// A set of byte offsets, as half-open ranges: which bytes of an object are cached.
public typealias ByteRangeSet = IntervalSet<Int64>

extension IntervalSet: CustomStringConvertible {
  /// The runs in order as half-open ranges, e.g. `[0..<4, 8..<10]`; `[]` when empty.
  public var description: String {
    "[" + ranges.map { "\($0.lowerBound)..<\($0.upperBound)" }.joined(separator: ", ") + "]"
  }
}
