import Foundation
import MediaCache
import NIOHTTP1
import Testing

@testable import MediaCacheHTTP

/// Which of an origin response's fields are stored with the object (`OriginClient.storedFields`).
@Suite struct StoredFieldsTests {
  @Test func hopByHopFramingAndOwnFieldsAreLeftOut() {
    let headers = HTTPHeaders([
      ("Cache-Control", "max-age=60"), ("Connection", "close, X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "5"),
      ("Content-Length", "10"), ("ETag", "\"a\""), ("Set-Cookie", "s=1"), ("X-Kept", "yes"),
    ])
    let stored = OriginClient.storedFields(headers, receivedAt: Date(timeIntervalSince1970: 1))
    #expect(stored.fields.map(\.name) == ["Cache-Control", "X-Kept"])
  }

  /// A response whose fields pass `StoredHeaders.maxBytes` loses others before the fields its freshness and
  /// revalidation depend on, wherever they stood; fields of one name keep their order.
  @Test func cachingFieldsAreKeptFirstWhenTheFieldsPassTheBound() {
    // 400 fields of about 64 bytes each: the bound is reached with less room left than one field takes.
    let filler = String(repeating: "f", count: 50)
    var fields = (0..<400).map { ("X-Filler-\($0)", filler) }
    fields += [
      ("Vary", "Accept-Language"), ("Cache-Control", "max-age=60"), ("Cache-Control", "must-revalidate"),
      ("Date", "Mon, 01 Jan 2024 00:00:00 GMT"), ("Expires", "Mon, 01 Jan 2024 00:01:00 GMT"), ("Age", "3"),
    ]
    let stored = OriginClient.storedFields(HTTPHeaders(fields), receivedAt: Date(timeIntervalSince1970: 1))
    #expect(stored.values("Cache-Control") == ["max-age=60", "must-revalidate"])
    #expect(stored.values("Date") == ["Mon, 01 Jan 2024 00:00:00 GMT"])
    #expect(stored.values("Expires").count == 1 && stored.values("Age") == ["3"])
    #expect(stored.values("Vary") == ["Accept-Language"])
    let size = stored.fields.reduce(0) { $0 + 1 + $1.name.utf8.count + 2 + $1.value.utf8.count }
    #expect(size <= StoredHeaders.maxBytes)
    // The fillers that fit are kept, in their order.
    let kept = stored.fields.map(\.name).filter { $0.hasPrefix("X-Filler-") }
    #expect(!kept.isEmpty && kept.count < 400 && kept == (0..<kept.count).map { "X-Filler-\($0)" })
  }
}
