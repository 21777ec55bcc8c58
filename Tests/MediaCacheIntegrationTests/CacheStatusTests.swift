import Foundation
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// `Cache-Status` (RFC 9211) on the real binary's responses: `NAME; hit` when every byte of the range was
/// cached when the request came, `NAME; fwd=miss; stored` when none was, `NAME; fwd=partial; stored` when some
/// were (a HEAD too: it stores the object's length and validators); `--cache-status-name` names the proxy.
@Suite(.serialized) struct CacheStatusTests {
  @Test func eachResponseSaysHowItUsedTheCache() async throws {
    try await withTemporaryDirectory { directory in
      try await withFileOrigin { origin in
        // 64 KiB chunks: a range fills only the chunks it touches.
        let proxy = try await ProxyProcess(
          cache: "\(directory)/cache", ["--cache-status-name", "node-a", "--chunk-size", "65536"])
        let size = 600_000
        let url = origin.url(.normal, "status", size: size)
        let path = ProxyServer.proxyPath(for: url)
        let expected = TestOrigin.bytes(name: "status", size: size)
        func get(_ range: String?, method: String = "GET", path: String = path) async throws
          -> (String?, [UInt8])
        {
          let response = try await blocking {
            try proxy.request(path, method: method, headers: range.map { [("Range", $0)] } ?? [])
          }
          #expect(response.status == (range == nil ? 200 : 206), "\(range ?? "whole"): \(response.status)")
          #expect(response.headerCount("Cache-Status") == 1)
          return (response.header("Cache-Status"), response.body)
        }

        // A HEAD of another object (its origin request may go on filling that object for a moment).
        let (head, _) = try await get(
          nil, method: "HEAD", path: ProxyServer.proxyPath(for: origin.url(.normal, "head", size: size)))
        #expect(head == "node-a; fwd=miss; stored", "a HEAD of an object not cached")
        let (first, firstBody) = try await get("bytes=0-99999")
        #expect(first == "node-a; fwd=miss; stored")
        #expect(sameBytes(firstBody, Array(expected[0..<100_000])).equal)
        let (again, againBody) = try await get("bytes=0-99999")
        #expect(again == "node-a; hit")
        #expect(sameBytes(againBody, Array(expected[0..<100_000])).equal)
        let (overlap, overlapBody) = try await get("bytes=50000-399999")
        #expect(overlap == "node-a; fwd=partial; stored")
        #expect(sameBytes(overlapBody, Array(expected[50_000..<400_000])).equal)
        let (whole, wholeBody) = try await get(nil)
        #expect(whole == "node-a; fwd=partial; stored")
        #expect(sameBytes(wholeBody, expected).equal)
        let (cached, cachedBody) = try await get(nil)
        #expect(cached == "node-a; hit")
        #expect(sameBytes(cachedBody, expected).equal)
        let (cachedHead, _) = try await get(nil, method: "HEAD")
        #expect(cachedHead == "node-a; hit")

        // A playlist, rewritten by the proxy, says the same of the bytes it was made from.
        let playlist = ProxyServer.proxyPath(for: origin.url(file: "hls/v0/index.m3u8"))
        for expectedStatus in ["node-a; fwd=miss; stored", "node-a; hit"] {
          let response = try await blocking { try proxy.request(playlist) }
          #expect(response.status == 200)
          #expect(response.header("Cache-Status") == expectedStatus)
        }
        #expect(await proxy.stop().status == 0)
      }
    }
  }

  @Test func theDefaultNameIsMediaCacheAndABadOneIsAUsageError() async throws {
    try await withTemporaryDirectory { directory in
      try await withFileOrigin { origin in
        let proxy = try await ProxyProcess(cache: "\(directory)/cache")
        let response = try await blocking {
          try proxy.request(ProxyServer.proxyPath(for: origin.url(.normal, "default-name", size: 1000)))
        }
        #expect(response.header("Cache-Status") == "MediaCache; fwd=miss; stored")
        #expect(await proxy.stop().status == 0)
      }
      for bad in ["1node", "node a", "node;hit", "", String(repeating: "n", count: 65)] {
        let result = try await run(
          binary("mediacache"), ["proxy", "--cache", "\(directory)/cache", "--cache-status-name", bad])
        #expect(result.status == 64, "'\(bad)'")
        #expect(result.stderr.contains("--cache-status-name"), "'\(bad)': \(result.stderr)")
      }
    }
  }
}
