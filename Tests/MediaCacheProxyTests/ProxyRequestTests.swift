import Foundation
import NIOHTTP1
import Testing

@testable import MediaCacheProxy

@Suite struct ProxyRequestTests {
  /// The proxy's own percent decoder gives what Foundation's does, for escapes good and bad, ASCII and not,
  /// except that escapes decoding to invalid UTF-8 always give nil (Foundation gives nil for some, such as
  /// `%ff`, and repairs others, such as a lone `%A9`, with U+FFFD).
  @Test func percentDecodingAgreesWithFoundation() {
    let fixed = [
      "", "plain", "%41%42c", "%e2%82%AC", "http%3A%2F%2Fh%2Fa%20b", "%", "%4", "%G1", "a%2", "%ff", "%C3%28",
      "5%A9F",
      "100%25", "%00", "caf%C3%A9%3Fx%3D1",
    ]
    var random = SystemRandomNumberGenerator()
    let alphabet = Array("%%%0123456789abcdefABCDEFxyz/?=&é€".utf8)
    var cases = fixed
    for _ in 0..<2000 {
      let length = Int.random(in: 0...12, using: &random)
      let bytes = (0..<length).map { _ in alphabet.randomElement(using: &random)! }
      cases.append(String(decoding: bytes, as: UTF8.self))
    }
    for text in cases {
      let mine = ProxyRequest.percentDecoded(text[...])
      let foundation = text.removingPercentEncoding
      let invalidUTF8Repaired = mine == nil && foundation?.contains("\u{FFFD}") == true
      #expect(mine == foundation || invalidUTF8Repaired, "input \(text.debugDescription)")
    }
  }

  /// The target splits into path and query; a parameter's first value is decoded, or kept as sent if it does
  /// not decode; the key is matched as sent.
  @Test func pathAndQueryParameters() {
    let head = HTTPRequestHead(
      version: .http1_1, method: .GET,
      uri: "/v.mp4?x=1&url=http%3A%2F%2Fo%2Fv.mp4%3Fa%3D1&url=second&bad=%zz&e")
    let request = ProxyRequest(head: head)
    #expect(request.path == "/v.mp4")
    #expect(request.queryValue("url") == "http://o/v.mp4?a=1")
    #expect(request.queryValue("bad") == "%zz")
    #expect(request.queryValue("e") == "")
    #expect(request.queryValue("missing") == nil)
    #expect(
      ProxyRequest(head: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/metrics")).query == nil)
    // The public form the HLS fuzzer uses.
    #expect(ProxyServer.originURL(inRequestTarget: "/v.mp4?url=http%3A%2F%2Fo%2Fv.mp4") == "http://o/v.mp4")
    #expect(ProxyServer.originURL(inRequestTarget: "/v.mp4?x=1") == nil)
  }
}
