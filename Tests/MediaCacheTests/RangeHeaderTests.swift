import MediaCacheTestSupport
import Testing

@testable import MediaCache

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

  /// Spaces and tabs around the value and around each spec are trimmed in linear time, so a header at the size
  /// limit costs the proxy microseconds. (The range fuzzer found trimming by `Character` with `dropLast()`,
  /// which counts the whole string for every space removed: quadratic, tens of milliseconds for 4 KiB.)
  @Test func spacesUpToTheSizeLimitAreTrimmedCheaply() {
    let padding = { (used: Int) in String(repeating: " ", count: RangeHeader.maxLength - used) }
    let values = [
      "bytes=0-1" + padding(13) + ",2-3",  // after a spec
      "bytes=" + padding(13) + "0-1,2-3",  // before a spec
      "bytes=5-9" + padding(9),  // after the value
      padding(9) + "bytes=5-9",  // before the value
    ]
    let expected: [RangeHeader] = [
      .multiple, .multiple, .single(.bounded(5..<10)), .single(.bounded(5..<10)),
    ]
    var results: [RangeHeader] = []
    let spent = threadCPUTime {
      for _ in 0..<50 { results = values.map { RangeHeader($0) } }
    }
    #expect(values.allSatisfy { $0.utf8.count == RangeHeader.maxLength })
    #expect(results == expected)
    // Linear trimming takes milliseconds of CPU for all 200 (in a debug build); quadratic took 7 s.
    #expect(spent < .seconds(1), "200 parses of a 4 KiB header took \(spent) of CPU")
  }
}
