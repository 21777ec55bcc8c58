import MediaCache
import PropertyBased
import Testing

/// `IntervalSet` checked against the obvious model: a `Set` of its members.
@Suite struct ChunkSetTests {
  /// One edit: insert or remove `range`.
  struct Edit: Sendable, CustomStringConvertible {
    var insert: Bool
    var range: Range<Int>
    var description: String { "\(insert ? "+" : "-")\(range)" }
  }

  static let universe = 0..<240
  static let edit = zip(Gen.bool, Gen.int(in: 0...200), Gen.int(in: 0...30)).map { insert, start, length in
    Edit(insert: insert, range: start..<(start + length))
  }
  static let edits = edit.array(of: 0...40)

  /// Applies `edits` to both the set and the model.
  static func build(_ edits: [Edit]) -> (ChunkSet, Set<Int>) {
    var set = ChunkSet()
    var model = Set<Int>()
    for edit in edits {
      let range = edit.range
      if edit.insert {
        set.insert(range)
        model.formUnion(range)
      } else {
        set.remove(range)
        model.subtract(range)
      }
    }
    return (set, model)
  }

  /// The members of `model` inside `range` as maximal runs, ascending.
  static func runs(of model: Set<Int>, in range: Range<Int>) -> [Range<Int>] {
    var result: [Range<Int>] = []
    var start: Int?
    for value in range.lowerBound...range.upperBound {
      let member = value < range.upperBound && model.contains(value)
      if member, start == nil { start = value }
      if !member, let first = start {
        result.append(first..<value)
        start = nil
      }
    }
    return result
  }

  /// Whether `ranges` are canonical, checked independently of the library.
  static func isCanonical(_ ranges: [Range<Int>]) -> Bool {
    ranges.allSatisfy { !$0.isEmpty }
      && zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound }
  }

  @Test func insertAndRemoveMatchTheModel() async {
    await propertyCheck(count: 300, input: Self.edits) { edits in
      var set = ChunkSet()
      var model = Set<Int>()
      for edit in edits {
        let range = edit.range
        if edit.insert {
          set.insert(range)
          model.formUnion(range)
        } else {
          set.remove(range)
          model.subtract(range)
        }
        set.checkInvariants()
        #expect(Self.isCanonical(set.ranges))
      }
      #expect(Array(set.members) == model.sorted())
      #expect(set.ranges == Self.runs(of: model, in: Self.universe))
      #expect(set.count == model.count)
      #expect(set.isEmpty == model.isEmpty)
      #expect(set.span == model.min().map { $0..<(model.max()! + 1) })
      for value in Self.universe { #expect(set.contains(value) == model.contains(value), "value \(value)") }
    }
  }

  @Test func containsRangeMatchesTheModel() async {
    await propertyCheck(
      count: 200, input: Self.edits, Gen.int(in: 0...220), Gen.int(in: 0...20)
    ) { edits, start, length in
      let (set, model) = Self.build(edits)
      let range = start..<(start + length)
      #expect(set.contains(range) == range.allSatisfy(model.contains), "\(set) contains \(range)")
    }
  }

  @Test func singleMembersInsertAndRemove() async {
    await propertyCheck(count: 200, input: zip(Gen.bool, Gen.int(in: 0...60)).array(of: 0...80)) { edits in
      var set = ChunkSet()
      var model = Set<Int>()
      for (insert, value) in edits {
        if insert {
          set.insert(value)
          model.insert(value)
        } else {
          set.remove(value)
          model.remove(value)
        }
        set.checkInvariants()
      }
      #expect(Array(set.members) == model.sorted())
    }
  }

  @Test func setAlgebraMatchesTheModel() async {
    await propertyCheck(count: 300, input: Self.edits, Self.edits, Gen.int(in: 0...200), Gen.int(in: 0...80))
    {
      editsA, editsB, start, length in
      let (a, modelA) = Self.build(editsA)
      let (b, modelB) = Self.build(editsB)

      let union = a.union(b)
      union.checkInvariants()
      #expect(Array(union.members) == modelA.union(modelB).sorted())
      #expect(union == b.union(a))

      let difference = a.subtracting(b)
      difference.checkInvariants()
      #expect(Array(difference.members) == modelA.subtracting(modelB).sorted())

      let window = start..<(start + length)
      let intersection = a.intersection(window)
      intersection.checkInvariants()
      #expect(Array(intersection.members) == modelA.filter(window.contains).sorted())
    }
  }

  @Test func gapsAreTheMissingMembersAsRuns() async {
    await propertyCheck(count: 300, input: Self.edits, Gen.int(in: 0...230), Gen.int(in: 0...100)) {
      edits, start, length in
      let (set, model) = Self.build(edits)
      let window = start..<(start + length)
      let missing = Set(window).subtracting(model)
      #expect(set.gaps(in: window) == Self.runs(of: missing, in: window), "gaps of \(set) in \(window)")
    }
  }

  @Test func canonicalInitializerAcceptsExactlyCanonicalRuns() async {
    let rangeGen = zip(Gen.int(in: 0...100), Gen.int(in: -2...12)).map { start, length in
      start..<(start + max(0, length))
    }
    await propertyCheck(count: 400, input: rangeGen.array(of: 0...6)) { ranges in
      let built = ChunkSet(canonical: ranges)
      #expect((built != nil) == Self.isCanonical(ranges), "\(ranges)")
      if let built { #expect(built.ranges == ranges) }
      // The general initializer accepts anything and canonicalises it.
      let general = ChunkSet(ranges)
      general.checkInvariants()
      #expect(Array(general.members) == Set(ranges.flatMap { $0 }).sorted())
    }
  }

  @Test(arguments: [
    [0..<0],
    [3..<5, 5..<7],
    [3..<6, 5..<7],
    [8..<9, 1..<2],
    [1..<4, 1..<4],
  ])
  func canonicalInitializerRejects(_ ranges: [Range<Int>]) {
    #expect(ChunkSet(canonical: ranges) == nil)
  }

  @Test func equalMembersMeanEqualSets() {
    let a = ChunkSet([0..<3, 10..<12, 3..<5, 11..<20])
    var b = ChunkSet()
    for value in [19, 0, 4, 10, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 11] { b.insert(value) }
    #expect(a == b)
    #expect(a.hashValue == b.hashValue)
    #expect(a.ranges == [0..<5, 10..<20])
    #expect(a.description == "[0..<5, 10..<20]")
  }

  @Test func byteRangeSetHandlesLargeOffsets() async {
    // Offsets near the largest content length the format stores, where Int32 arithmetic would overflow.
    let base: Int64 = 1 << 52
    let edit = zip(Gen.bool, Gen.int64(in: 0...5_000_000_000), Gen.int64(in: 0...3_000_000_000))
    await propertyCheck(count: 200, input: edit.array(of: 0...20)) { edits in
      var set = ByteRangeSet()
      var model: [Range<Int64>] = []  // model as a list of inserted/removed ranges, evaluated per probe
      for (insert, start, length) in edits {
        let range = (base + start)..<(base + start + length)
        if insert { set.insert(range) } else { set.remove(range) }
        model.append(range)
        set.checkInvariants()
      }
      // Probe the boundaries of every edit: membership is decided by the last edit that covers a point.
      for probe in model.flatMap({ [$0.lowerBound - 1, $0.lowerBound, $0.upperBound - 1, $0.upperBound] }) {
        let last = edits.indices.last { model[$0].contains(probe) }
        let expected = last.map { edits[$0].0 } ?? false
        #expect(set.contains(probe) == expected, "probe \(probe)")
      }
      let total = set.ranges.reduce(Int64(0)) { $0 + Int64($1.count) }
      #expect(set.count == total)
    }
  }

  @Test func insertAtTheSmallestBound() {
    var set = ByteRangeSet()
    set.insert(Int64.min..<(Int64.min + 4))
    set.insert((Int64.min + 4)..<(Int64.min + 6))
    set.insert(0..<1)
    set.checkInvariants()
    #expect(set.ranges == [Int64.min..<(Int64.min + 6), 0..<1])
    set.remove(Int64.min..<(Int64.min + 2))
    #expect(set.ranges == [(Int64.min + 2)..<(Int64.min + 6), 0..<1])
  }
}
