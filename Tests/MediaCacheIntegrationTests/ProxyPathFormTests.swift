import Foundation
import MediaCacheProxy
import MediaCacheStreaming
import MediaCacheTestOrigin
import Testing

/// Path-form proxy URLs (`/<scheme>/<host[:port]>/<path>[?query]`) through a real `mediacache proxy` and a
/// real origin: the mapping, byte for byte, the cache shared with the query form, and each refusal.
@Suite struct ProxyPathFormTests {
  @Test func aPathFormRequestReachesTheOriginURLItStandsFor() async throws {
    try await withProxy { fixture in
      let url = fixture.origin.url(.normal, "pathform", size: 300_000, query: "token=a%2Fb&x=1")
      let path = "/http/127.0.0.1:\(fixture.origin.port)/normal/pathform?size=300000&token=a%2Fb&x=1"
      #expect(fixture.path(url) == path)
      let response = try await fixture.request(path, headers: [("Range", "bytes=1000-1999")])
      #expect(response.status == 206)
      let body = sameBytes(
        response.body, TestOrigin.bytes(name: "pathform", size: 300_000, range: 1000..<2000))
      #expect(body.equal, "\(body)")
      // The origin saw the path and query byte for byte.
      #expect(
        fixture.origin.requests(for: "pathform").map(\.path) == [
          "/normal/pathform?size=300000&token=a%2Fb&x=1"
        ])

      // Dot segments that stay under the host are removed, as a client resolving a reference would.
      let dotted = try await fixture.request(
        "/http/127.0.0.1:\(fixture.origin.port)/normal/x/../pathform?size=300000&token=a%2Fb&x=1",
        headers: [("Range", "bytes=0-9")])
      #expect(dotted.status == 206)
      #expect(dotted.body == TestOrigin.bytes(name: "pathform", size: 300_000, range: 0..<10))
    }
  }

  @Test func bothFormsShareTheCachedBytes() async throws {
    try await withProxy { fixture in
      let url = fixture.origin.url(.normal, "shared", size: 2_500_000)
      let viaPath = try await fixture.request(fixture.path(url))
      #expect(viaPath.status == 200)
      #expect(fixture.origin.totalBodyBytes(for: "shared") == 2_500_000)
      fixture.origin.resetRecords()
      let viaQuery = try await fixture.request(ProxyServer.queryFormPath(for: url))
      #expect(viaQuery.status == 200)
      #expect(viaQuery.body == viaPath.body)
      #expect(fixture.origin.requests(for: "shared").isEmpty, "\(fixture.origin.allRequests())")
      // And the other way round, for a range.
      let url2 = fixture.origin.url(.normal, "shared2", size: 100_000)
      _ = try await fixture.request(ProxyServer.queryFormPath(for: url2))
      fixture.origin.resetRecords()
      let ranged = try await fixture.request(fixture.path(url2), headers: [("Range", "bytes=-10")])
      #expect(ranged.status == 206)
      #expect(ranged.body == TestOrigin.bytes(name: "shared2", size: 100_000, range: 99_990..<100_000))
      #expect(fixture.origin.allRequests().isEmpty)
    }
  }

  @Test func targetsThatCannotBeMappedBackAreRefusedWith400() async throws {
    try await withProxy(arguments: ["--allow-host", "127.0.0.1"]) { fixture in
      let port = fixture.origin.port
      let cases: [(target: String, reason: String)] = [
        ("/http/127.0.0.1:\(port)/../x", "climbs above the host"),
        ("/http/127.0.0.1:\(port)/normal/../../x", "climbs above the host"),
        ("/http/../127.0.0.1/x", "where the host should be"),
        ("/http//normal/x", "host is empty"),
        ("/https/", "host is empty"),
        ("/http/127.0.0.1:port/normal/x", "bad port"),
        ("/http/127.0.0.1:65536/normal/x", "bad port"),
        ("/http/user:secret@127.0.0.1:\(port)/normal/x", "userinfo"),
        ("/ftp/127.0.0.1/x", "unsupported scheme 'ftp'"),
        ("/file/etc/passwd", "unsupported scheme 'file'"),
      ]
      for (target, reason) in cases {
        let response = try await fixture.request(target)
        let text = String(decoding: response.body, as: UTF8.self)
        #expect(response.status == 400, "\(target): \(text)")
        #expect(text.contains(reason), "\(target): \(text)")
        #expect(text.split(separator: "\n").count == 1, "\(target): \(text)")
      }
      // The allowed-hosts check applies to the path form as to the query form.
      let otherHost = try await fixture.request("/http/localhost:\(port)/normal/x?size=10")
      #expect(otherHost.status == 403)
      #expect(String(decoding: otherHost.body, as: UTF8.self).contains("localhost"))
      #expect(fixture.origin.allRequests().isEmpty, "\(fixture.origin.allRequests())")
      // /metrics and the query form keep working beside it.
      #expect(try await fixture.request("/metrics").status == 200)
      let query = try await fixture.request(
        ProxyServer.queryFormPath(for: fixture.origin.url(.normal, "q", size: 10)))
      #expect(query.status == 200)
      #expect(query.body == TestOrigin.bytes(name: "q", size: 10, range: 0..<10))
    }
  }
}
