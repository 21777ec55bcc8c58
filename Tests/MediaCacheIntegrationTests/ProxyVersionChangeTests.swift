import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// An object that changes at the origin while the proxy holds part of it.
@Suite struct ProxyVersionChangeTests {
  static let size = 7_260_627

  /// Found by tools/soak (a wrong byte at the first byte of a response): with the head and the tail of an
  /// object cached, the origin changed it; a range over the missing middle was answered with the old ETag and
  /// the new version's bytes. The response's head was made from the cached version, then the flight's
  /// `If-Range` found the change, reset the object, and the reader, having delivered nothing yet, went on with
  /// the new version. Whatever a response carries is the version its ETag names. Since nothing went out yet
  /// when the change is found, the proxy opens the read again (`mediacache_proxy_reads_reopened_total`) and
  /// answers with the new version whole, rather than a 502 (which tools/torture's many-processes class met
  /// when another process replaced an object between a head and its first byte).
  @Test func aResponseNeverCarriesBytesOfAnotherVersionThanItsETag() async throws {
    try await withProxy { fixture in
      let name = "changes"
      let path = fixture.path(fixture.origin.url(.normal, name, size: Self.size))
      for range in ["bytes=0-1000000", "bytes=6000000-"] {
        let warm = try await fixture.request(path, headers: [("Range", range)])
        #expect(warm.status == 206 && warm.isComplete, "\(range)")
        #expect(warm.header("ETag") == TestOrigin.etag(name: name, version: 0))
      }
      #expect(try await fixture.metric("mediacache_proxy_reads_reopened_total") == 0)
      fixture.origin.setVersion(name: name, to: 1)
      let lower = 5_313_823
      let upper = 7_019_744
      for attempt in 0..<3 {
        let response = try await fixture.request(path, headers: [("Range", "bytes=\(lower)-\(upper - 1)")])
        #expect(
          response.status == 206 && response.isComplete, "attempt \(attempt): status \(response.status)")
        #expect(response.header("ETag") == TestOrigin.etag(name: name, version: 1), "attempt \(attempt)")
        let expected = TestOrigin.bytes(name: name, size: Self.size, version: 1, range: lower..<upper)
        let comparison = sameBytes(response.body, expected)
        #expect(comparison.equal, "attempt \(attempt): \(comparison)")
      }
      #expect(try await fixture.metric("mediacache_proxy_reads_reopened_total") == 1)
    }
  }
}
