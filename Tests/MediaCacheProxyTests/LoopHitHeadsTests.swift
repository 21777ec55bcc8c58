import Foundation
import MediaCache
import NIOCore
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

@Suite struct LoopHitHeadsTests {
  /// A kept head is sent again only for the same key made from the same source: any part of either that
  /// differs makes a new head (and a new source replaces the kept one), other keys keep theirs, and the memo
  /// starts again empty once full.
  @Test func aHeadIsReusedOnlyForTheSameKeyAndSource() throws {
    try onALoop { loop in
      let heads = LoopHitHeads(loop: loop)
      var made = 0
      /// The number of the head sent for `key` and `source` (the heads made are numbered from 1).
      func head(_ key: LoopHitHeads.Key, _ source: LoopHitHeads.Source) -> Int {
        let head = heads.head(for: key, from: source) {
          made += 1
          return HTTPResponseHead(version: .http1_1, status: .ok, headers: ["x-made": "\(made)"])
        }
        return Int(head.headers["x-made"].first ?? "") ?? -1
      }
      let id = ObjectID(CacheKey("http://127.0.0.1:9/a.mp4"))
      let key = LoopHitHeads.Key(
        objectID: id, range: 0..<65_536, partial: true, versionMajor: 1, versionMinor: 1, keepAlive: true)
      let stored = StoredHeaders(
        receivedAt: Date(timeIntervalSince1970: 1_700_000_000),
        fields: [.init(name: "Cache-Control", value: "max-age=60")])
      let source = LoopHitHeads.Source(
        length: 1 << 20, contentType: "video/mp4", etag: "\"a\"", lastModified: nil, storedHeaders: stored,
        age: 3, second: 1_700_000_003)
      #expect(head(key, source) == 1)
      #expect(head(key, source) == 1)
      #expect(made == 1)

      // Another source for the same key: a new head, kept in place of the first.
      var sources: [LoopHitHeads.Source] = []
      for change in 0..<7 {
        var other = source
        switch change {
        case 0: other.length += 1
        case 1: other.contentType = "video/webm"
        case 2: other.etag = "\"b\""
        case 3: other.lastModified = "Tue, 14 Nov 2023 22:13:20 GMT"
        case 4:
          other.storedHeaders = StoredHeaders(
            receivedAt: stored.receivedAt, fields: [.init(name: "Cache-Control", value: "max-age=61")])
        case 5: other.age = 4
        default: other.second += 1
        }
        sources.append(other)
      }
      for (index, other) in sources.enumerated() {
        let number = head(key, other)
        #expect(number == made && number == index + 2, "change \(index)")
        #expect(head(key, other) == number, "change \(index), again")
      }
      #expect(head(key, source) == made, "the first source again makes a new head")
      let current = made

      // Another key: a head of its own; the first key keeps its head.
      var keys: [LoopHitHeads.Key] = []
      for change in 0..<5 {
        var other = key
        switch change {
        case 0: other.objectID = ObjectID(CacheKey("http://127.0.0.1:9/b.mp4"))
        case 1: other.range = 1..<65_537
        case 2: other.partial = false
        case 3: other.versionMinor = 0
        default: other.keepAlive = false
        }
        keys.append(other)
      }
      for (index, other) in keys.enumerated() {
        #expect(head(other, source) == current + index + 1, "key change \(index)")
      }
      #expect(head(key, source) == current)

      // Full: the next new key empties the memo first.
      var filler = key
      while made < current + keys.count + LoopHitHeads.capacity {
        filler.range = (filler.range.lowerBound + 100_000)..<(filler.range.upperBound + 100_000)
        _ = head(filler, source)
      }
      let before = made
      #expect(head(key, source) == before + 1, "emptied when full")
    }
  }
}
