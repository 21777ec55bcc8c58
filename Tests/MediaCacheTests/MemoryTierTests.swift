import Foundation
import MediaCache
import PropertyBased
import Testing

@Suite struct MemoryTierTests {
  static func id(_ n: Int) -> ObjectID { ObjectID(CacheKey("memory-\(n)")) }
  static func bytes(_ count: Int, _ fill: UInt8) -> Data { Data(repeating: fill, count: count) }

  @Test func leastRecentlyUsedIsEvictedFirst() {
    let tier = MemoryTier(costLimit: 100)
    #expect(tier.insert(Self.bytes(40, 1), for: Self.id(1)))
    #expect(tier.insert(Self.bytes(40, 2), for: Self.id(2)))
    #expect(tier.data(for: Self.id(1)) == Self.bytes(40, 1))  // 1 is now the most recently used
    #expect(tier.insert(Self.bytes(40, 3), for: Self.id(3)))  // 120 > 100: 2 goes
    #expect(tier.data(for: Self.id(2)) == nil)
    #expect(tier.data(for: Self.id(1)) == Self.bytes(40, 1))
    #expect(tier.data(for: Self.id(3)) == Self.bytes(40, 3))
    #expect(tier.totalCost == 80)
    #expect(tier.count == 2)
    // 3 was read last, so 1 is the oldest; a 90-byte object needs both gone.
    #expect(tier.insert(Self.bytes(90, 4), for: Self.id(4)))
    #expect(tier.count == 1)
    #expect(tier.data(for: Self.id(4))?.count == 90)
    #expect(tier.totalCost == 90)
  }

  @Test func anObjectLargerThanTheLimitIsNotHeld() {
    let tier = MemoryTier(costLimit: 100)
    tier.insert(Self.bytes(50, 1), for: Self.id(1))
    tier.insert(Self.bytes(30, 2), for: Self.id(2))
    #expect(!tier.insert(Self.bytes(101, 9), for: Self.id(3)))
    #expect(tier.data(for: Self.id(3)) == nil)
    // The others were not evicted to make room for it.
    #expect(tier.count == 2)
    #expect(tier.totalCost == 80)
    // An oversized new version of a held object also drops the old version: it must not be served.
    #expect(!tier.insert(Self.bytes(200, 7), for: Self.id(1)))
    #expect(tier.data(for: Self.id(1)) == nil)
    #expect(tier.totalCost == 30)
    // Exactly the limit fits.
    #expect(tier.insert(Self.bytes(100, 5), for: Self.id(5)))
    #expect(tier.totalCost == 100)
    #expect(tier.count == 1)
  }

  @Test func replacingAndRemovingKeepTheCostRight() {
    let tier = MemoryTier(costLimit: 1000)
    tier.insert(Self.bytes(100, 1), for: Self.id(1))
    tier.insert(Self.bytes(300, 2), for: Self.id(1))
    #expect(tier.totalCost == 300)
    #expect(tier.data(for: Self.id(1)) == Self.bytes(300, 2))
    tier.insert(Self.bytes(50, 3), for: Self.id(2))
    tier.remove(Self.id(1))
    tier.remove(Self.id(99))  // not held: nothing happens
    #expect(tier.totalCost == 50)
    #expect(tier.count == 1)
  }

  @Test func removeAllReturnsTheBytesReleased() {
    let tier = MemoryTier(costLimit: 1000)
    tier.insert(Self.bytes(100, 1), for: Self.id(1))
    tier.insert(Self.bytes(250, 2), for: Self.id(2))
    tier.insert(Data(), for: Self.id(3))
    #expect(tier.removeAll() == 350)
    #expect(tier.count == 0)
    #expect(tier.totalCost == 0)
    #expect(tier.data(for: Self.id(2)) == nil)
    #expect(tier.removeAll() == 0)
  }

  /// One operation on the tier: 0 insert, 1 read, 2 remove.
  struct Operation: Sendable, CustomStringConvertible {
    var kind: Int
    var key: Int
    var size: Int
    var description: String { ["insert", "read", "remove"][kind] + "(\(key), \(size))" }
  }

  @Test func matchesAReferenceLRU() async {
    let operation = zip(Gen.int(in: 0...2), Gen.int(in: 0...7), Gen.int(in: 0...70)).map { kind, key, size in
      Operation(kind: kind, key: key, size: size)
    }
    await propertyCheck(count: 300, input: operation.array(of: 0...60)) { operations in
      let limit = 150
      let tier = MemoryTier(costLimit: limit)
      // The model: (key, size), most recently used last.
      var model: [(key: Int, size: Int)] = []
      for op in operations {
        let id = Self.id(op.key)
        switch op.kind {
        case 0:
          let held = tier.insert(Self.bytes(op.size, UInt8(op.key)), for: id)
          model.removeAll { $0.key == op.key }
          #expect(held == (op.size <= limit))
          if op.size <= limit {
            model.append((op.key, op.size))
            while model.reduce(0, { $0 + $1.size }) > limit { model.removeFirst() }
          }
        case 1:
          let data = tier.data(for: id)
          if let index = model.firstIndex(where: { $0.key == op.key }) {
            let entry = model.remove(at: index)
            model.append(entry)
            #expect(data == Self.bytes(entry.size, UInt8(op.key)))
          } else {
            #expect(data == nil)
          }
        default:
          tier.remove(id)
          model.removeAll { $0.key == op.key }
        }
        #expect(tier.count == model.count)
        #expect(tier.totalCost == model.reduce(0) { $0 + $1.size })
      }
      // Reading everything in the model order keeps that order; everything else is gone.
      for key in 0...7 {
        let expected = model.first { $0.key == key }.map { Self.bytes($0.size, UInt8(key)) }
        #expect(tier.data(for: Self.id(key)) == expected, "key \(key)")
      }
    }
  }
}
