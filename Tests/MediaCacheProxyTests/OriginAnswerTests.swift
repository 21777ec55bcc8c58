import NIOCore
import NIOHTTP1
import Testing

@testable import MediaCacheHTTP

/// `OriginAnswer`: a status's answer read by the cache's own request, and which players it may be relayed to.
@Suite struct OriginAnswerTests {
  func answer(_ fields: [(String, String)], forwarded: [OriginHeader] = []) -> OriginAnswer {
    OriginAnswer(
      HTTPResponseHead(version: .http1_1, status: .notFound, headers: HTTPHeaders(fields)),
      forwarded: forwarded)
  }

  @Test func fitsPlayersWhoseForwardedFieldsAreTheSameAndOnlyWhenShareable() throws {
    let token = try OriginHeader(name: "Authorization", value: "Bearer a")
    let other = try OriginHeader(name: "authorization", value: "Bearer b")
    let plain = answer([("X-Why", "gone"), ("Connection", "close")])
    #expect(plain.status == 404 && plain.fields.map(\.name) == ["X-Why"])
    #expect(plain.fits(forwarded: []))
    #expect(!plain.fits(forwarded: [token]), "asked without the player's Authorization")
    let withToken = answer([("X-Why", "gone")], forwarded: [token])
    #expect(withToken.fits(forwarded: [try OriginHeader(name: "AUTHORIZATION", value: "Bearer a")]))
    #expect(!withToken.fits(forwarded: [other]) && !withToken.fits(forwarded: []))
    for fields in [
      [("Set-Cookie", "s=1")], [("Cache-Control", "private")], [("Cache-Control", "max-age=5, no-store")],
    ] {
      #expect(!answer(fields).fits(forwarded: []), "\(fields)")
    }
  }

  @Test func theBodyIsBoundedAndEachRelayReadsItWhole() async throws {
    var page = answer([])
    let appended = [
      page.append(ByteBuffer(repeating: 1, count: OriginAnswer.maxBody - 1)),
      page.append(ByteBuffer(repeating: 2, count: 2)),
      page.append(ByteBuffer(repeating: 3, count: 1)),
    ]
    #expect(appended == [true, false, true], "the second part would pass the bound")
    for _ in 0..<2 {
      let body = page.forwarded.body
      let first = try #require(try await body.next())
      #expect(
        first.readableBytes == OriginAnswer.maxBody && first.getInteger(at: first.readerIndex) == UInt8(1))
      #expect(try await body.next() == nil)
    }
    #expect(try await answer([]).forwarded.body.next() == nil, "an empty body ends at once")
  }
}
