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
}
