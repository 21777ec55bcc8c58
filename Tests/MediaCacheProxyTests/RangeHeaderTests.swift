import MediaCacheHTTP
import Testing

@testable import MediaCacheProxy

@Suite struct RangeHeaderTests {
  @Test func forms() {
    #expect(RangeHeader("bytes=0-99") == .single(.bounded(0..<100)))
    #expect(RangeHeader("bytes=100-") == .single(.from(100)))
    #expect(RangeHeader("bytes=-500") == .single(.suffix(500)))
    #expect(RangeHeader(" BYTES=5-5 ") == .single(.bounded(5..<6)))
    #expect(RangeHeader("bytes=0-1,5-9") == .multiple)
    #expect(RangeHeader(nil) == .none)
  }

  @Test func malformedHeadersAreIgnored() {
    for value in [
      "bytes=", "bytes=9-1", "bytes=a-b", "bytes=-", "bytes=1-2-3", "items=0-1", "bytes=0-1,", "bytes=+1-2",
      "bytes=99999999999999999999-", "bytes=0x10-", String(repeating: "bytes=0-1,", count: 1000),
    ] {
      #expect(RangeHeader(value) == .none, "\(value.prefix(40))")
    }
  }
}
