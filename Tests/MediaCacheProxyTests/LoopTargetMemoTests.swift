import MediaCache
import NIOCore
import Testing

@testable import MediaCacheProxy

@Suite struct LoopTargetMemoTests {
  /// A target is named by what was remembered for it, exactly; the memo starts again empty once full, and a
  /// target remembered after that is found.
  @Test func targetsAreRememberedExactlyAndTheMemoStartsAgainWhenFull() throws {
    try onALoop { loop in
      let memo = LoopTargetMemo(loop: loop)
      func target(_ index: Int) -> LoopTargetMemo.Target {
        let origin = "http://127.0.0.1:9/object-\(index)"
        return .init(origin: origin, objectID: ObjectID(CacheKey(origin)))
      }
      #expect(memo.target(for: "/http/127.0.0.1:9/object-0") == nil)
      for index in 0..<LoopTargetMemo.capacity {
        memo.remember(target(index), for: "/http/127.0.0.1:9/object-\(index)")
      }
      for index in [0, 1, LoopTargetMemo.capacity - 1] {
        let found = memo.target(for: "/http/127.0.0.1:9/object-\(index)")
        #expect(found?.origin == target(index).origin && found?.objectID == target(index).objectID)
      }
      // The target of the same path with another query is another target.
      #expect(memo.target(for: "/http/127.0.0.1:9/object-0?x=1") == nil)
      // Full: the next one empties the memo first.
      memo.remember(target(-1), for: "/http/127.0.0.1:9/object--1")
      #expect(memo.target(for: "/http/127.0.0.1:9/object-0") == nil)
      #expect(memo.target(for: "/http/127.0.0.1:9/object--1")?.origin == target(-1).origin)
    }
  }

  /// A target not remembered is resolved once and remembered; one that resolves to nothing (a target the
  /// proxy refuses) is asked again each time and not remembered; a remembered one is not resolved again.
  @Test func aTargetIsResolvedOnceAndRememberedUnlessItResolvesToNothing() throws {
    try onALoop { loop in
      let memo = LoopTargetMemo(loop: loop)
      let origin = "http://127.0.0.1:9/object"
      var resolutions = 0
      let resolve = { () -> LoopTargetMemo.Target? in
        resolutions += 1
        return .init(origin: origin, objectID: ObjectID(CacheKey(origin)))
      }
      #expect(memo.target(for: "/http/127.0.0.1:9/object", resolving: resolve)?.origin == origin)
      #expect(memo.target(for: "/http/127.0.0.1:9/object", resolving: resolve)?.origin == origin)
      #expect(resolutions == 1)
      #expect(memo.target(for: "/http/127.0.0.1:9/object")?.objectID == ObjectID(CacheKey(origin)))
      var refusals = 0
      let refuse = { () -> LoopTargetMemo.Target? in
        refusals += 1
        return nil
      }
      for _ in 0..<2 { #expect(memo.target(for: "/refused", resolving: refuse) == nil) }
      #expect(refusals == 2)
      #expect(memo.target(for: "/refused") == nil)
      // A target longer than `maxTargetBytes` is resolved each time, never kept; one of that length is kept.
      let long =
        "/http/127.0.0.1:9/object?pad=" + String(repeating: "a", count: LoopTargetMemo.maxTargetBytes)
      let longest = String(long.prefix(LoopTargetMemo.maxTargetBytes))
      resolutions = 0
      for _ in 0..<2 {
        #expect(memo.target(for: long, resolving: resolve)?.origin == origin)
        #expect(memo.target(for: longest, resolving: resolve)?.origin == origin)
      }
      #expect(resolutions == 3)
      #expect(memo.target(for: long) == nil && memo.target(for: longest) != nil)
    }
  }
}
