import Testing

@testable import MediaCacheHTTP

/// `OriginOutages`: which stale copies are served without asking the origin again, and for how long.
@Suite struct OriginOutagesTests {
  @Test func connectionTroubleMarksTheOriginAndA5xxOnlyItsURL() {
    let outages = OriginOutages()
    let now = ContinuousClock.now
    outages.noteFailure("https://A.example:8443/v/1.mp4?x=1", originWide: false, now: now)
    #expect(outages.isDown("https://A.example:8443/v/1.mp4?x=1", now: now))
    #expect(!outages.isDown("https://a.example:8443/v/2.mp4", now: now), "a 5xx says nothing of other URLs")
    outages.noteFailure("https://a.example:8443/v/3.mp4", originWide: true, now: now)
    #expect(outages.isDown("https://A.EXAMPLE:8443/other", now: now))
    #expect(!outages.isDown("https://a.example/other", now: now), "another port is another origin")
    #expect(!outages.isDown("http://a.example:8443/other", now: now), "another scheme is another origin")
    #expect(!outages.isDown("https://a.example:8443/other", now: now + OriginOutages.window), "it ends")
    // A 5xx of an origin's root URL is that URL's, not the origin's.
    outages.noteFailure("https://c.example/", originWide: false, now: now)
    #expect(
      outages.isDown("https://c.example/", now: now) && !outages.isDown("https://c.example/x", now: now))
  }

  @Test func anAnswerEndsTheOutageOfItsURLAndOrigin() {
    let outages = OriginOutages()
    outages.noteFailure("https://a.example/1", originWide: true)
    outages.noteFailure("https://b.example/2", originWide: false)
    outages.noteAnswer("https://a.example/anything")
    #expect(!outages.isDown("https://a.example/1"))
    #expect(outages.isDown("https://b.example/2"))
    outages.noteAnswer("https://b.example/2")
    #expect(!outages.isDown("https://b.example/2"))
  }

  @Test func theMemoryIsBounded() {
    let outages = OriginOutages()
    let now = ContinuousClock.now
    for index in 0..<(OriginOutages.limit + 10) {
      outages.noteFailure("https://a.example/\(index)", originWide: false, now: now)
    }
    #expect(outages.isDown("https://a.example/\(OriginOutages.limit + 9)", now: now))
    let remembered = (0..<(OriginOutages.limit + 10)).filter {
      outages.isDown("https://a.example/\($0)", now: now)
    }
    #expect(remembered.count <= OriginOutages.limit)
  }
}
