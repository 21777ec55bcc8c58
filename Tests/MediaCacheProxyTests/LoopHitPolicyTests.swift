import NIOEmbedded
import Synchronization
import Testing

@testable import MediaCacheProxy

/// When an event loop answers hits itself (`LoopHitPolicy`): up to its own bound, and up to twice that while
/// the proxy's connections in all stay within the bound per loop (the kernel spreads them unevenly).
struct LoopHitPolicyTests {
  @Test func aLoopAnswersHitsWithinItsBoundOrTwiceItWhileAllLoopsStayWithinTheirs() {
    let (first, second) = (EmbeddedEventLoop(), EmbeddedEventLoop())
    let counter = LoopHitPolicy.Counter()
    let a = LoopHitPolicy(loop: first, maxConnections: 4, loops: 2, allConnections: counter)
    let b = LoopHitPolicy(loop: second, maxConnections: 4, loops: 2, allConnections: counter)
    for _ in 0..<4 { a.opened() }
    #expect(a.answersHits && b.answersHits)
    // 6 and 2: the proxy is within 4 a loop, so the busier loop still answers.
    for _ in 0..<2 { a.opened() }
    for _ in 0..<2 { b.opened() }
    #expect(a.answersHits && b.answersHits)
    // 6 and 3: 9 in all is past 8; the loop within its own 4 answers, the other does not.
    b.opened()
    #expect(!a.answersHits && b.answersHits)
    b.closed()
    #expect(a.answersHits)
    // 9 and 0: past twice its own bound, whatever the total.
    for _ in 0..<2 { b.closed() }
    for _ in 0..<3 { a.opened() }
    #expect(!a.answersHits && b.answersHits)
    for _ in 0..<9 { a.closed() }
    #expect(a.answersHits && counter.value.load(ordering: .relaxed) == 0)
  }
}
