import Foundation
import NIOHTTP1
import Testing

@testable import MediaCacheHTTP
@testable import MediaCacheProxy

@Suite struct HTTPDateTests {
  /// The hand-written calendar arithmetic agrees with Foundation's formatter over dates from 1970 to 2200,
  /// leap days and year ends included.
  @Test func formatsAsFoundationDoes() {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    var samples: [Int64] = [0, 59, 86_399, 86_400, 951_782_400, 951_868_799, 1_709_164_800, 4_107_542_399]
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<2000 { samples.append(Int64.random(in: 0..<7_258_118_400, using: &generator)) }
    for seconds in samples {
      let expected = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
      #expect(HTTPDate.format(secondsSinceEpoch: seconds) == expected, "\(seconds)")
    }
    #expect(HTTPDate.format(secondsSinceEpoch: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
  }

  /// `now()` is the current second (give or take the second boundary).
  @Test func nowIsTheCurrentSecond() {
    let before = Int64(Date().timeIntervalSince1970)
    let text = HTTPDate.now()
    let after = Int64(Date().timeIntervalSince1970)
    #expect((before...after).map { HTTPDate.format(secondsSinceEpoch: $0) }.contains(text), "\(text)")
  }

  /// Every response head the proxy writes carries Date, whatever the response (RFC 9110 §6.6.1).
  @Test func everyResponseHeadHasADate() {
    let response = ProxyResponse(status: .notFound, headers: [:], body: .empty)
    for keepAlive in [true, false] {
      let head = ProxyConnectionHandler.responseHead(response, version: .http1_1, keepAlive: keepAlive)
      #expect(head.headers["date"].count == 1)
      let formatter = DateFormatter()
      formatter.locale = Locale(identifier: "en_US_POSIX")
      formatter.timeZone = TimeZone(identifier: "GMT")
      formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
      let sent = head.headers.first(name: "date").flatMap { formatter.date(from: $0) }
      #expect(sent.map { abs($0.timeIntervalSinceNow) < 5 } == true, "\(head.headers)")
    }
  }
}

@Suite struct HTTPDateParsingTests {
  /// The three forms of RFC 9110 §5.6.7 give the same instant; formatting and parsing are inverses.
  @Test func parsesTheThreeFormsAndInvertsFormat() {
    #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
    #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
    #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == 784_111_777)
    #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
    #expect(HTTPDate.parse("Tue, 29 Feb 2000 23:59:59 GMT") == 951_868_799)
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<2000 {
      let seconds = Int64.random(in: 0..<7_258_118_400, using: &generator)
      #expect(HTTPDate.parse(HTTPDate.format(secondsSinceEpoch: seconds)) == seconds, "\(seconds)")
    }
  }

  /// What is not an HTTP-date is nil, not a guess.
  @Test func refusesWhatIsNotAnHTTPDate() {
    for text in [
      "", "yesterday", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 94 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 1900 00:00:00 GMT",
      "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
      "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov  6 08:49:37 94", "1994-11-06T08:49:37Z",
      "Sun, 06 Nov 1994 08:4a:37 GMT",
    ] {
      #expect(HTTPDate.parse(text) == nil, "\(text)")
    }
  }
}
