import Foundation
import HTTPTypes
import MediaCache
import NIOCore
import NIOHTTP1
import Testing

@testable import MediaCacheHTTP
@testable import MediaCacheProxy

@Suite struct LoopHitHeadsTests {
  /// A kept head is used again only for the same key made from the same source: any part of either that
  /// differs makes a new head (and a new source replaces the kept one), other keys keep theirs, and the memo
  /// starts again empty once full. The range's fields are added to the kept head per hit, and the last whole
  /// head is sent again as it is for the same range and connection handling.
  @Test func aHeadIsReusedOnlyForTheSameKeyAndSource() throws {
    try onALoop { loop in
      let heads = LoopHitHeads(loop: loop)
      var made = 0
      var completed = 0
      /// The number of the head kept for `key` and `source` (the heads made are numbered from 1), and that of
      /// the whole head sent for `range` and `keepAlive` (numbered from 1 too), which must name both.
      func head(
        _ key: LoopHitHeads.Key, _ source: LoopHitHeads.Source, range: Range<Int64> = 0..<65_536,
        keepAlive: Bool = true
      ) -> (made: Int, completed: Int) {
        let head = heads.head(for: key, range: range, keepAlive: keepAlive, from: source) {
          made += 1
          return HTTPResponseHead(version: .http1_1, status: .ok, headers: ["x-made": "\(made)"])
        } complete: { template in
          completed += 1
          var head = template
          head.headers.add(name: "x-completed", value: "\(completed)")
          head.headers.add(name: "x-range", value: "\(range) \(keepAlive)")
          return head
        }
        #expect(head.headers["x-range"] == ["\(range) \(keepAlive)"])
        return (
          Int(head.headers["x-made"].first ?? "") ?? -1, Int(head.headers["x-completed"].first ?? "") ?? -1
        )
      }
      let id = ObjectID(CacheKey("http://127.0.0.1:9/a.mp4"))
      let key = LoopHitHeads.Key(objectID: id, partial: true, versionMajor: 1, versionMinor: 1)
      let stored = StoredHeaders(
        receivedAt: Date(timeIntervalSince1970: 1_700_000_000),
        fields: [.init(name: "Cache-Control", value: "max-age=60")])
      let source = LoopHitHeads.Source(
        length: 1 << 20, contentType: "video/mp4", etag: "\"a\"", lastModified: nil, storedHeaders: stored,
        age: 3, second: 1_700_000_003)
      #expect(head(key, source) == (1, 1))
      #expect(head(key, source) == (1, 1), "the same range: the last whole head as it is")
      #expect(head(key, source, range: 1..<65_537) == (1, 2), "another range: the kept head completed")
      #expect(head(key, source, range: 1..<65_537, keepAlive: false) == (1, 3))
      #expect(head(key, source, range: 1..<65_537, keepAlive: false) == (1, 3))
      #expect(head(key, source) == (1, 4), "only the last whole head is kept")
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
        let number = head(key, other).made
        #expect(number == made && number == index + 2, "change \(index)")
        #expect(head(key, other).made == number, "change \(index), again")
      }
      #expect(head(key, source).made == made, "the first source again makes a new head")
      let current = made

      // Another key: a head of its own; the first key keeps its head.
      var keys: [LoopHitHeads.Key] = []
      for change in 0..<4 {
        var other = key
        switch change {
        case 0: other.objectID = ObjectID(CacheKey("http://127.0.0.1:9/b.mp4"))
        case 1: other.partial = false
        case 2: other.versionMinor = 0
        default: other.versionMajor = 2
        }
        keys.append(other)
      }
      for (index, other) in keys.enumerated() {
        #expect(head(other, source).made == current + index + 1, "key change \(index)")
      }
      #expect(head(key, source).made == current)

      // Full: the next new key empties the memo first.
      var filler = key
      var fillers = 0
      while made < current + keys.count + LoopHitHeads.capacity {
        fillers += 1
        filler.objectID = ObjectID(CacheKey("http://127.0.0.1:9/filler-\(fillers).mp4"))
        _ = head(filler, source)
      }
      let before = made
      #expect(head(key, source).made == before + 1, "emptied when full")
    }
  }

  /// A loop hit's head (`ProxyConnectionHandler.hitHead` of the kept head without the range's fields) is the
  /// head made whole for the same hit (`ProxyResponder.hitHeaders`, then `responseHead`), field for field and
  /// in the same order: with and without stored fields (an origin `Date`, which the head keeps; fields the
  /// proxy sends its own of, which it drops), with and without an age, part or whole, HTTP/1.0 and 1.1, ranges
  /// from one byte to the whole object, the connection kept or closed.
  @Test func aHitsHeadIsTheHeadMadeWhole() {
    let received = Date(timeIntervalSince1970: 1_700_000_000)
    let storedSets: [StoredHeaders?] = [
      nil,
      StoredHeaders(
        receivedAt: received,
        fields: [
          .init(name: "Cache-Control", value: "max-age=60"),
          .init(name: "Date", value: "Tue, 14 Nov 2023 22:13:20 GMT"),
          .init(name: "content-length", value: "5"),
          .init(name: "Content-Range", value: "bytes 0-1/2"), .init(name: "Connection", value: "keep-alive"),
          .init(name: "Via", value: "1.1 other"), .init(name: "X-Custom", value: "a"),
        ]),
      StoredHeaders(receivedAt: received, fields: [.init(name: "X-Custom", value: "a")]),
    ]
    let length: Int64 = 300_000
    let ranges: [Range<Int64>] = [0..<65_536, 1000..<66_536, 299_000..<300_000, 70_000..<70_001, 0..<300_000]
    var compared = 0
    for stored in storedSets {
      for freshness in [nil, ObjectFreshness(age: 3, lifetime: 60)] {
        let fields = ProxyResponder.headers(
          contentType: "video/mp4", etag: "\"e\"", lastModified: nil, stored: stored, freshness: freshness,
          cacheStatus: "MediaCache; hit", via: "1.1 MediaCache")
        for partial in [true, false] {
          let status: HTTPResponse.Status = partial ? .partialContent : .ok
          for version in [HTTPVersion.http1_0, .http1_1] {
            let template = ProxyConnectionHandler.responseHead(
              status: status, headers: fields, version: version, extraCapacity: 3)
            for range in ranges {
              for keepAlive in [true, false] {
                var whole = fields
                ProxyResponder.addBodyFields(
                  &whole, first: range.lowerBound, count: Int64(range.count), length: length,
                  partial: partial,
                  ifRange: false)
                let made = ProxyConnectionHandler.responseHead(
                  status: status, headers: whole, version: version, keepAlive: keepAlive)
                let hit = ProxyConnectionHandler.hitHead(
                  template, range: range, length: length, partial: partial, version: version,
                  keepAlive: keepAlive)
                let what = "\(range), partial \(partial), \(version), keep-alive \(keepAlive)"
                #expect(
                  hit.headers.map { "\($0.name): \($0.value)" }
                    == made.headers.map { "\($0.name): \($0.value)" },
                  "\(what)")
                #expect(hit == made, "\(what)")
                compared += 1
              }
            }
          }
        }
      }
    }
    #expect(compared == 240)
  }
}
