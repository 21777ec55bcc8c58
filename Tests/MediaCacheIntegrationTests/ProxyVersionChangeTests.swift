import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// An object that changes at the origin while the proxy holds part of it.
@Suite struct ProxyVersionChangeTests {
  static let size = 7_260_627

  /// Found by tools/soak (a wrong byte at the first byte of a response): with the head and the tail of an
  /// object cached, the origin changed it; a range over the missing middle was answered with the old ETag and
  /// the new version's bytes The response's head was made from the cached version, then the flight's
  /// `If-Range` found the change, reset the object, and the reader, having delivered nothing yet, went on with
  /// the new version. Now whatever a response carries is the version its ETag names: it is refused (502)
  /// or cut where the version changes, and the next request gets the new version whole.
  @Test func aResponseNeverCarriesBytesOfAnotherVersionThanItsETag() async throws {
    try await withProxy { fixture in
      let name = "changes"
      let path = fixture.path(fixture.origin.url(.normal, name, size: Self.size))
      for range in ["bytes=0-1000000", "bytes=6000000-"] {
        let warm = try await fixture.request(path, headers: [("Range", range)])
        #expect(warm.status == 206 && warm.isComplete, "\(range)")
        #expect(warm.header("ETag") == TestOrigin.etag(name: name, version: 0))
      }
      fixture.origin.setVersion(name: name, to: 1)
      let lower = 5_313_823
      let upper = 7_019_744
      var responses: [RawHTTPResponse] = []
      for _ in 0..<3 {
        let response = try await fixture.request(path, headers: [("Range", "bytes=\(lower)-\(upper - 1)")])
        responses.append(response)
        // Refused (502) when the change is found before the head goes out: no bytes, no validators.
        guard response.status == 206 else {
          #expect(response.status == 502 && response.header("ETag") == nil, "status \(response.status)")
          continue
        }
        let version = response.header("ETag") == TestOrigin.etag(name: name, version: 1) ? 1 : 0
        #expect(response.header("ETag") == TestOrigin.etag(name: name, version: version))
        let expected = TestOrigin.bytes(
          name: name, size: Self.size, version: version, range: lower..<(lower + response.body.count))
        let comparison = sameBytes(response.body, expected)
        #expect(
          comparison.equal, "complete: \(response.isComplete), under version \(version)'s ETag: \(comparison)"
        )
      }
      let last = try #require(responses.last)
      #expect(last.isComplete && last.header("ETag") == TestOrigin.etag(name: name, version: 1))
    }
  }
}
