import Foundation
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// RFC 9111 through the real binary, one rule per test, against a test origin that sends each header: what may
/// be stored (`no-store`, `private`), how long it stays fresh (`max-age`, `s-maxage`, `Expires`, `no-cache`,
/// `Age`), how a stale copy is revalidated (a 304 keeps the bytes and updates the stored fields; another
/// version replaces them; an unreachable origin leaves a stale copy served unless `must-revalidate`), the
/// end-to-end fields kept and stored, and `--ignore-cache-control` / `--default-ttl`.
@Suite(.serialized) struct HTTPCachingTests {
  static let size = 100_000

  /// A proxy process on a fresh cache with `arguments`, and an origin.
  func withProxy(
    _ arguments: [String] = [], _ body: (TestOrigin, ProxyProcess, String) async throws -> Void
  ) async throws {
    try await withTemporaryDirectory { directory in
      try await withOrigin { origin in
        let cache = "\(directory)/cache"
        let proxy = try await ProxyProcess(cache: cache, arguments)
        try await body(origin, proxy, cache)
        #expect(await proxy.stop().status == 0)
      }
    }
  }

  /// The proxy path of object `name` in the `normal` mode, with `query` items (percent-encoded here).
  func path(_ origin: TestOrigin, _ name: String, _ query: [(String, String)] = []) -> String {
    let encoded = query.map {
      "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0.1)"
    }
    let url = origin.url(.normal, name, size: Self.size, query: encoded.joined(separator: "&"))
    return ProxyServer.proxyPath(for: url)
  }

  func get(_ proxy: ProxyProcess, _ path: String, _ headers: [(String, String)] = []) async throws
    -> RawHTTPResponse
  {
    try await blocking { try proxy.request(path, headers: headers) }
  }

  /// The response is the object's bytes (of `version`), whole.
  func expectBytes(_ response: RawHTTPResponse, _ name: String, version: Int = 0, _ what: String) {
    #expect(response.status == 200, "\(what): \(response.status)")
    let expected = TestOrigin.bytes(name: name, size: Self.size, version: version)
    #expect(sameBytes(response.body, expected).equal, "\(what)")
  }

  /// The bytes of every data file under the cache's objects (0 when there is none).
  ///
  /// The proxy removes an object it may not keep, and its emptied shard directories, after the response: a walk
  /// that meets a directory or file removed under it (CI, 2026-11-29: "objects/a6" does not exist) walks again.
  func storedDataBytes(_ cache: String) throws -> Int {
    let objects = "\(cache)/objects"
    var attempt = 0
    while true {
      attempt += 1
      guard FileManager.default.fileExists(atPath: objects) else { return 0 }
      do {
        return try FileManager.default.subpathsOfDirectory(atPath: objects).filter { $0.hasSuffix(".data") }
          .reduce(0) {
            $0 + ((try FileManager.default.attributesOfItem(atPath: "\(objects)/\($1)")[.size] as? Int) ?? 0)
          }
      } catch let error as NSError
        where attempt < 5 && error.domain == NSCocoaErrorDomain
        && error.code == CocoaError.fileReadNoSuchFile.rawValue
      {
        Thread.sleep(forTimeInterval: 0.05)
      }
    }
  }

  /// The paths of objects `name` with `Cache-Control` values of a second, each fetched once through `proxy`,
  /// once they are stale (2.2 s later).
  func staleCopies(
    _ origin: TestOrigin, _ proxy: ProxyProcess, _ objects: [(name: String, cacheControl: String)]
  )
    async throws -> [String]
  {
    let start = ContinuousClock.now
    var paths: [String] = []
    for (name, cacheControl) in objects {
      paths.append(path(origin, name, [("cache-control", cacheControl)]))
      expectBytes(try await get(proxy, paths.last!), name, "\(name) fetched")
    }
    try await waitUntil(start, plus: 2.2)
    return paths
  }

  /// The lifetime of copies a test first sees fresh and then stale: long enough for a miss and a hit on a loaded
  /// CI machine (a `max-age=2` copy was once already stale at its first hit there).
  static let shortTTL = 5

  /// Waits until `seconds` have passed since `start` (freshness is counted in whole seconds).
  func waitUntil(_ start: ContinuousClock.Instant, plus seconds: Double) async throws {
    let deadline = start + .milliseconds(Int(seconds * 1000))
    if deadline > .now { try await Task.sleep(until: deadline) }
  }

  @Test func endToEndFieldsAreStoredWithTheObjectAndHopByHopOnesAreNot() async throws {
    try await withTemporaryDirectory { directory in
      try await withOrigin { origin in
        let cache = "\(directory)/cache"
        let query = [
          ("cache-control", "public, max-age=600"),
          ("header", "Content-Disposition: attachment; filename=\"clip.mp4\""),
          ("header", "X-Origin-Tag: tag-1"), ("header", "X-Origin-Tag: tag-2"),
          ("header", "Set-Cookie: session=secret"), ("header", "Connection: X-Hop"), ("header", "X-Hop: 1"),
          ("header", "Vary: Accept-Encoding"), ("header", "Date: Tue, 01 Jan 2030 00:00:00 GMT"),
        ]
        let path = path(origin, "fields", query)
        func check(_ response: RawHTTPResponse, _ what: String) {
          expectBytes(response, "fields", what)
          #expect(response.header("Content-Disposition") == "attachment; filename=\"clip.mp4\"", "\(what)")
          #expect(response.headerCount("X-Origin-Tag") == 2, "\(what)")
          #expect(response.header("Cache-Control") == "public, max-age=600", "\(what)")
          #expect(response.header("Vary") == "Accept-Encoding", "\(what)")
          #expect(response.header("Date") == "Tue, 01 Jan 2030 00:00:00 GMT", "\(what): the origin's Date")
          #expect(response.headerCount("Date") == 1, "\(what)")
          #expect(response.header("Set-Cookie") == nil && response.header("X-Hop") == nil, "\(what)")
          #expect(response.header("Content-Type") == "video/mp4", "\(what)")
          #expect(response.header("Content-Length") == "\(Self.size)", "\(what)")
          #expect(response.header("X-Content-Type-Options") == "nosniff", "\(what)")
          #expect(response.header("Age") != nil, "\(what)")
        }
        let proxy = try await ProxyProcess(cache: cache)
        check(try await get(proxy, path), "the miss")
        check(try await get(proxy, path), "the hit")
        #expect(origin.requests(for: "fields").count == 1)
        #expect(await proxy.stop().status == 0)
        // Another process serves them from the manifest (1.3).
        let second = try await ProxyProcess(cache: cache)
        let hit = try await get(second, path)
        check(hit, "the hit of a new process")
        #expect(hit.header("Cache-Status") == "MediaCache; hit")
        #expect(origin.requests(for: "fields").count == 1)
        let manifests = try FileManager.default.subpathsOfDirectory(atPath: "\(cache)/objects")
          .filter { $0.hasSuffix(".manifest") }
        #expect(manifests.count == 1)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(cache)/objects/\(manifests[0])"))
        #expect(bytes[5] == 3, "manifest minor version")
        #expect(
          !String(decoding: bytes, as: UTF8.self).contains("session=secret"), "Set-Cookie is not stored")
        #expect(await second.stop().status == 0)
      }
    }
  }

  @Test func noStoreIsRelayedFromTheOriginAndNeverStored() async throws {
    try await withProxy { origin, proxy, cache in
      let path = path(origin, "nostore", [("cache-control", "no-store")])
      for round in 1...3 {
        let response = try await get(proxy, path)
        expectBytes(response, "nostore", "round \(round)")
        #expect(response.header("Cache-Status") == "MediaCache; fwd=miss; detail=not-storable")
        #expect(response.header("Cache-Control") == "no-store")
      }
      // A range is relayed with the origin's own 206.
      let range = try await get(proxy, path, [("Range", "bytes=100-199")])
      #expect(range.status == 206 && range.header("Content-Range") == "bytes 100-199/\(Self.size)")
      #expect(Array(range.body) == Array(TestOrigin.bytes(name: "nostore", size: Self.size)[100..<200]))
      // Each request went to the origin: the first as the cache's refused fetch and its relay, the rest
      // relayed at once (remembered as not storable).
      #expect(origin.requests(for: "nostore").filter { $0.status == 200 || $0.status == 206 }.count == 5)
      #expect(try storedDataBytes(cache) == 0, "no byte of a no-store response is on disk")
    }
  }

  @Test func varyStarAndVaryOnAForwardedFieldAreRelayedOtherVaryIsStored() async throws {
    // (proxy arguments, Vary, stored?) The proxy's origin requests carry no player field but forwarded ones, so
    // a Vary on another field names the variant every player gets anyway.
    let cases: [([String], String, Bool)] = [
      ([], "Accept-Language", true), ([], "*", false),
      (["--forward-header", "Accept-Language"], "Accept-Language", false),
      (["--ignore-cache-control"], "*", true),
    ]
    for (arguments, vary, stored) in cases {
      try await withProxy(arguments) { origin, proxy, _ in
        let path = path(origin, "varies", [("cache-control", "max-age=600"), ("header", "Vary: \(vary)")])
        expectBytes(try await get(proxy, path, [("Accept-Language", "fr")]), "varies", "first")
        let second = try await get(proxy, path, [("Accept-Language", "de")])
        expectBytes(second, "varies", "second")
        #expect(second.header("Vary") == vary)
        #expect(
          second.header("Cache-Status")
            == (stored ? "MediaCache; hit" : "MediaCache; fwd=miss; detail=not-storable"),
          "\(arguments) Vary: \(vary)")
      }
    }
  }

  @Test func aStoredCopyIsDroppedWhenTheOriginSaysNoStoreLater() async throws {
    try await withProxy { origin, proxy, cache in
      let name = "turns-no-store"
      origin.setHeaders(name: name, [("Cache-Control", "max-age=1")])
      let path = path(origin, name)
      let start = ContinuousClock.now
      expectBytes(try await get(proxy, path), name, "stored")
      #expect(try storedDataBytes(cache) == Self.size)
      origin.setHeaders(name: name, [("Cache-Control", "no-store")])
      try await waitUntil(start, plus: 2.5)
      // The revalidation's 304 says no-store: the copy goes, the response is relayed.
      let relayed = try await get(proxy, path)
      expectBytes(relayed, name, "relayed")
      #expect(relayed.header("Cache-Status") == "MediaCache; fwd=miss; detail=not-storable")
      try await Task.sleep(for: .milliseconds(1500))  // the session's linger: its commit
      #expect(try storedDataBytes(cache) == 0)
    }
  }

  @Test func aNoStorePlaylistIsRelayedAndStillRewritten() async throws {
    try await withTemporaryDirectory { directory in
      try await withFileOrigin { origin in
        let proxy = try await ProxyProcess(cache: "\(directory)/cache")
        let file = "hls/v0/index.m3u8"
        origin.setHeaders(name: file, [("Cache-Control", "no-store")])
        let url = origin.url(file: file)
        for path in [
          ProxyServer.proxyPath(for: url),
          "/index.m3u8?url=\(url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)",
        ] {
          let response = try await get(proxy, path)
          #expect(response.status == 200, "\(path)")
          #expect(response.header("Cache-Status") == "MediaCache; fwd=miss; detail=not-storable")
          let text = String(decoding: response.body, as: UTF8.self)
          #expect(text.hasPrefix("#EXTM3U"), "\(text.prefix(40))")
          #expect(response.header("ETag") == nil, "rewritten")
          if path.hasPrefix("/index.m3u8") {
            // The query form names every segment through the proxy.
            let segments = text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
            #expect(!segments.isEmpty && segments.allSatisfy { $0.hasPrefix("/http/127.0.0.1:") }, "\(text)")
          }
        }
        #expect(await proxy.stop().status == 0)
      }
    }
  }

  @Test func aCachedPlaylistIsServedWithItsStoredFields() async throws {
    try await withTemporaryDirectory { directory in
      try await withFileOrigin { origin in
        let proxy = try await ProxyProcess(cache: "\(directory)/cache")
        let file = "hls/v0/index.m3u8"
        origin.setHeaders(
          name: file,
          [("Cache-Control", "max-age=600"), ("X-Playlist-Tag", "p1"), ("Content-Language", "en")])
        let path = ProxyServer.proxyPath(for: origin.url(file: file))
        for (round, status) in [(1, "MediaCache; fwd=miss; stored"), (2, "MediaCache; hit")] {
          let response = try await get(proxy, path)
          #expect(response.status == 200, "round \(round)")
          #expect(String(decoding: response.body, as: UTF8.self).hasPrefix("#EXTM3U"), "round \(round)")
          #expect(response.header("Cache-Status") == status, "round \(round)")
          #expect(response.header("Cache-Control") == "max-age=600", "round \(round)")
          #expect(response.header("X-Playlist-Tag") == "p1", "round \(round)")
          #expect(response.header("Content-Language") == "en", "round \(round)")
          #expect(response.header("Age").flatMap { Int($0) } != nil, "round \(round)")
          #expect(response.header("ETag") == nil, "rewritten, round \(round)")
        }
        #expect(origin.requests(for: file).count == 1)
        #expect(await proxy.stop().status == 0)
      }
    }
  }

  @Test func privateIsRelayedByASharedProxyAndStoredByAPrivateOne() async throws {
    for (arguments, stored) in [([String](), false), (["--private-cache"], true)] {
      try await withProxy(arguments) { origin, proxy, _ in
        let path = path(origin, "private", [("cache-control", "private, max-age=600")])
        expectBytes(try await get(proxy, path), "private", "first")
        let second = try await get(proxy, path)
        expectBytes(second, "private", "second")
        #expect(
          second.header("Cache-Status")
            == (stored ? "MediaCache; hit" : "MediaCache; fwd=miss; detail=not-storable"), "\(arguments)")
      }
    }
  }

  @Test func aStaleCopyIsRevalidatedAndA304UpdatesItsStoredFields() async throws {
    try await withProxy { origin, proxy, _ in
      let name = "revalidated"
      origin.setHeaders(name: name, [("Cache-Control", "max-age=\(Self.shortTTL)"), ("X-Generation", "1")])
      let path = path(origin, name)
      // The miss and the hit on one thread: within `shortTTL` of each other however long the test's task waits
      // for the pool; the copy's age counted from the miss's end (`start`).
      let (miss, start, fresh) = try await blocking {
        (try proxy.request(path), ContinuousClock.now, try proxy.request(path))
      }
      expectBytes(miss, name, "miss")
      #expect(fresh.header("Cache-Status") == "MediaCache; hit")
      let requests = origin.requests(for: name).count
      // Stale after `shortTTL` seconds: the next read asks the origin with the stored ETag first.
      origin.setHeaders(name: name, [("Cache-Control", "max-age=600"), ("X-Generation", "2")])
      try await waitUntil(start, plus: Double(Self.shortTTL) + 1.5)
      let revalidated = try await get(proxy, path)
      expectBytes(revalidated, name, "revalidated")
      #expect(revalidated.header("Cache-Status") == "MediaCache; fwd=stale; fwd-status=304")
      #expect(
        revalidated.header("X-Generation") == "2" && revalidated.header("Cache-Control") == "max-age=600")
      let conditional = Array(origin.requests(for: name).dropFirst(requests))
      #expect(conditional.count == 1)
      #expect(conditional.first?.headers["if-none-match"] == TestOrigin.etag(name: name))
      #expect(conditional.first?.status == 304)
      // Fresh for 600 s now: no more origin requests.
      let after = try await get(proxy, path)
      #expect(after.header("Cache-Status") == "MediaCache; hit" && after.header("X-Generation") == "2")
      #expect(origin.requests(for: name).count == requests + 1)
    }
  }

  @Test func aStaleCopyOfAChangedObjectIsReplaced() async throws {
    try await withProxy { origin, proxy, _ in
      let name = "replaced"
      let path = path(origin, name, [("cache-control", "max-age=\(Self.shortTTL)")])
      // The first read, the change and the fresh read on one thread: within `shortTTL` of each other however
      // long the test's task waits for the pool; the copy's age counted from the first read's end (`start`).
      let (first, start, fresh) = try await blocking {
        let first = try proxy.request(path)
        let start = ContinuousClock.now
        origin.setVersion(name: name, to: 1)
        return (first, start, try proxy.request(path))
      }
      expectBytes(first, name, "version 0")
      #expect(fresh.header("ETag") == TestOrigin.etag(name: name), "fresh: still version 0")
      try await waitUntil(start, plus: Double(Self.shortTTL) + 1.5)
      let replaced = try await get(proxy, path)
      expectBytes(replaced, name, version: 1, "version 1")
      #expect(replaced.header("ETag") == TestOrigin.etag(name: name, version: 1))
      #expect(replaced.header("Cache-Status") == "MediaCache; fwd=stale; stored")
      expectBytes(try await get(proxy, path), name, version: 1, "version 1 from the cache")
    }
  }

  /// A copy fresh only by the heuristic (no `Cache-Control` or `Expires`: RFC 9111 4.2.2, at least two
  /// minutes) is revalidated before a range past its end is refused: a file still growing at the origin (a
  /// recording, LL-HLS parts as byte ranges of one file; nginx sends no freshness for static files) gets its
  /// new bytes, not a 416 from the copy. An unchanged file's 416 stands; explicit freshness is trusted.
  @Test func aRangePastTheEndOfAHeuristicallyFreshCopyAsksTheOriginFirst() async throws {
    try await withProxy { origin, proxy, _ in
      let past = [("Range", "bytes=100000-119999")]
      let grown = 150_000
      // Grown (a new entity tag, as nginx's changes with the size): the new bytes.
      let growing = path(origin, "growing")
      expectBytes(try await get(proxy, growing), "growing", "before it grew")
      origin.setSize(name: "growing", to: grown)
      origin.setVersion(name: "growing", to: 1)
      try await Task.sleep(for: .seconds(1.1))  // the copy is a second old (checked at most once a second)
      let after = try await get(proxy, growing, past)
      #expect(after.status == 206, "\(after.status)")
      #expect(
        after.body == TestOrigin.bytes(name: "growing", size: grown, version: 1, range: 100_000..<120_000))
      #expect(after.header("Content-Range") == "bytes 100000-119999/\(grown)")

      // Not grown: one conditional request, and the 416 with the copy's length.
      let still = path(origin, "still")
      expectBytes(try await get(proxy, still), "still", "whole")
      try await Task.sleep(for: .seconds(1.1))
      let before = origin.requests(for: "still").count
      let refused = try await get(proxy, still, past)
      #expect(refused.status == 416 && refused.header("Content-Range") == "bytes */\(Self.size)")
      #expect(origin.requests(for: "still").count == before + 1, "\(origin.requests(for: "still"))")
      // Asked again at once: the check a moment ago stands (at most one a second), no origin request.
      #expect(try await get(proxy, still, past).status == 416)
      #expect(origin.requests(for: "still").count == before + 1)

      // Explicitly fresh: the copy's length stands, and the origin is not asked.
      let fixed = path(origin, "fixed", [("cache-control", "max-age=3600")])
      expectBytes(try await get(proxy, fixed), "fixed", "whole")
      origin.setSize(name: "fixed", to: grown)
      origin.setVersion(name: "fixed", to: 1)
      let asked = origin.requests(for: "fixed").count
      #expect(try await get(proxy, fixed, past).status == 416)
      #expect(origin.requests(for: "fixed").count == asked)
    }
  }

  @Test func freshnessComesFromSMaxAgeMaxAgeExpiresAndAge() async throws {
    // Each object: its query, whether it is still fresh 2 s after it was stored in a shared cache, and in a
    // private one (which ignores s-maxage).
    let cases: [(String, [(String, String)], shared: Bool, private: Bool)] = [
      ("max-age-600", [("cache-control", "max-age=600")], true, true),
      ("s-maxage-1", [("cache-control", "max-age=600, s-maxage=1")], false, true),
      ("max-age-0", [("cache-control", "max-age=0")], false, false),
      ("no-cache", [("cache-control", "no-cache, max-age=600")], false, false),
      ("invalid-max-age", [("cache-control", "max-age=soon")], false, false),
      ("absurd-max-age", [("cache-control", "max-age=99999999999999999999999")], true, true),
      ("expired", [("header", "Expires: Thu, 01 Jan 1970 00:00:00 GMT")], false, false),
      ("expires-invalid", [("header", "Expires: 0")], false, false),
      ("expires-later", [("header", "Expires: Fri, 01 Jan 2100 00:00:00 GMT")], true, true),
      ("aged", [("cache-control", "max-age=100"), ("header", "Age: 99")], false, false),
      ("heuristic", [], true, true),  // Last-Modified in 2024: a day, heuristically
    ]
    for isPrivate in [false, true] {
      try await withProxy(isPrivate ? ["--private-cache"] : []) { origin, proxy, _ in
        let start = ContinuousClock.now
        for (name, query, _, _) in cases {
          expectBytes(try await get(proxy, path(origin, name, query)), name, name)
        }
        try await waitUntil(start, plus: 2.2)
        for (name, query, shared, privately) in cases {
          let fresh = isPrivate ? privately : shared
          let before = origin.requests(for: name).count
          let response = try await get(proxy, path(origin, name, query))
          expectBytes(response, name, name)
          let status = response.header("Cache-Status") ?? ""
          #expect(
            status == (fresh ? "MediaCache; hit" : "MediaCache; fwd=stale; fwd-status=304"),
            "\(name), \(isPrivate ? "private" : "shared"): \(status)")
          #expect(origin.requests(for: name).count == before + (fresh ? 0 : 1), "\(name)")
          if name == "aged", let age = response.header("Age").flatMap(Int.init) {
            // Revalidated: the 304's Age (99 again) plus the time since.
            #expect(age >= 99, "Age \(age)")
          }
        }
      }
    }
  }

  @Test func aStaleCopyIsServedWhenTheOriginFailsUnlessMustRevalidate() async throws {
    try await withProxy { origin, proxy, _ in
      let paths = try await staleCopies(
        origin, proxy, [("lenient", "max-age=1"), ("strict", "max-age=1, must-revalidate")])
      let (lenient, strict) = (paths[0], paths[1])
      origin.setFault(.serverErrors)
      let stale = try await get(proxy, lenient)
      expectBytes(stale, "lenient", "stale")
      let status = stale.header("Cache-Status") ?? ""
      #expect(
        status.hasPrefix("MediaCache; hit; ttl=-") && status.hasSuffix("; detail=stale-after-error"),
        "\(status)")
      // For 10 s after the failure the origin is not asked again for a copy that may be served stale.
      let asked = origin.requests(for: "lenient").count
      let again = try await get(proxy, lenient)
      expectBytes(again, "lenient", "stale again")
      #expect(again.header("Cache-Status")?.hasSuffix("; detail=stale-after-error") == true)
      #expect(origin.requests(for: "lenient").count == asked, "the origin was asked again within 10 s")
      let refused = try await get(proxy, strict)
      #expect(refused.status >= 500, "must-revalidate: no stale copy (\(refused.status))")
      #expect(origin.requests(for: "strict").count >= 2, "must-revalidate asks the origin all the same")
      origin.setFault(nil)
      let recovered = try await get(proxy, strict)
      expectBytes(recovered, "strict", "after the origin recovered")
      #expect(recovered.header("Cache-Status") == "MediaCache; fwd=stale; fwd-status=304")
      // A 5xx is remembered for its URL only: the origin's answer for another URL does not end it, and the
      // lenient copy is still served stale without asking (connection trouble would mark the whole origin, and
      // any answer from it would end that: OriginOutagesTests).
      let stillStale = try await get(proxy, lenient)
      expectBytes(stillStale, "lenient", "after the origin recovered")
      #expect(stillStale.header("Cache-Status")?.hasSuffix("; detail=stale-after-error") == true)
      #expect(origin.requests(for: "lenient").count == asked)
    }
  }

  /// Connection trouble marks the whole origin: its other stale copies are served stale without asking, until
  /// the origin answers any request again.
  @Test func anUnreachableOriginIsNotAskedAgainUntilItAnswers() async throws {
    try await withProxy { origin, proxy, _ in
      let paths = try await staleCopies(origin, proxy, [("reset-a", "max-age=1"), ("reset-b", "max-age=1")])
      let (first, second) = (paths[0], paths[1])
      origin.setFault(.connectionResets)
      for (name, path) in [("reset-a", first), ("reset-b", second)] {
        let stale = try await get(proxy, path)
        expectBytes(stale, name, "stale")
        #expect(stale.header("Cache-Status")?.hasSuffix("; detail=stale-after-error") == true, "\(name)")
      }
      #expect(origin.requests(for: "reset-b").count == 1, "the origin was asked again for another object")
      origin.setFault(nil)
      // A miss the origin answers ends the outage: the next stale copy is revalidated.
      expectBytes(try await get(proxy, path(origin, "reset-c")), "reset-c", "a new object")
      let revalidated = try await get(proxy, second)
      expectBytes(revalidated, "reset-b", "revalidated")
      #expect(revalidated.header("Cache-Status") == "MediaCache; fwd=stale; fwd-status=304")
    }
  }

  @Test func ignoreCacheControlStoresWhatTheOriginForbidsAndDefaultTTLSetsFreshness() async throws {
    try await withProxy(["--ignore-cache-control", "--default-ttl", "\(Self.shortTTL)"]) { origin, proxy, _ in
      let path = path(origin, "ignored", [("cache-control", "no-store, max-age=600")])
      // The miss and the hit on one thread, as above.
      let (miss, start, fresh) = try await blocking {
        (try proxy.request(path), ContinuousClock.now, try proxy.request(path))
      }
      expectBytes(miss, "ignored", "miss")
      #expect(fresh.header("Cache-Status") == "MediaCache; hit")
      try await waitUntil(start, plus: Double(Self.shortTTL) + 1.5)
      let revalidated = try await get(proxy, path)
      expectBytes(revalidated, "ignored", "after the default TTL")
      #expect(revalidated.header("Cache-Status") == "MediaCache; fwd=stale; fwd-status=304")
    }
    for bad in ["-1", "2147483649", "soon"] {
      let result = try await run(binary("mediacache"), ["proxy", "--default-ttl", bad, "--port", "0"])
      #expect(result.status == 64, "--default-ttl \(bad): \(result.status) \(result.stderr)")
    }
  }

  @Test func statusesOtherThan200And206AreRelayedWithTheirFieldsAndBodiesAndNotStored() async throws {
    try await withProxy { origin, proxy, cache in
      let cases: [(status: Int, body: Bool)] = [
        (404, true), (410, true), (403, true), (204, false), (503, true),
      ]
      for (status, hasBody) in cases {
        let name = "status-\(status)"
        let path = path(origin, name, [("status", "\(status)"), ("header", "X-Why: origin said \(status)")])
        for round in 1...2 {
          let response = try await get(proxy, path)
          #expect(response.status == status, "\(name) round \(round)")
          #expect(response.header("X-Why") == "origin said \(status)", "\(name)")
          #expect(response.header("Cache-Status") == "MediaCache; fwd=miss; fwd-status=\(status)", "\(name)")
          let text = String(decoding: response.body, as: UTF8.self)
          #expect(text == (hasBody ? "status \(status) for \(name)\n" : ""), "\(name): the origin's own body")
          #expect(response.header("Content-Type") == (hasBody ? "text/plain; charset=utf-8" : nil), "\(name)")
          // The answer the cache's own request got is the one relayed: one origin request per player request
          // (a 5xx is retried first, as any).
          if status < 500 {
            #expect(origin.requests(for: name).count == round, "\(name): origin requests by round \(round)")
          }
        }
      }
      // Nothing of them is stored: every request reached the origin, and no byte is on disk.
      #expect(origin.requests(for: "status-404").count == 2)
      #expect(try storedDataBytes(cache) == 0)
      // A conditional request is relayed with its conditions (the origin might answer it otherwise).
      let conditional = path(origin, "status-404", [("status", "404")])
      let answered = try await get(proxy, conditional, [("If-None-Match", "\"other\"")])
      #expect(answered.status == 404)
      let asked = origin.requests(for: "status-404")
      #expect(asked.count == 4 && asked.last?.headers["if-none-match"] == "\"other\"", "\(asked.count)")
    }
  }

  /// The cache's own request reads a status's answer to relay it, but only an answer it may give any player, and
  /// only for as long as `OriginAnswer.readTimeout`; otherwise the origin is asked again for the player, and the
  /// status stays the origin's.
  @Test func aStatusAnswerIsRelayedOnlyWhenItFitsAndArrivesInTime() async throws {
    try await withProxy { origin, proxy, _ in
      // An answer that sets a cookie is one player's: not handed to others, so not relayed from the cache's
      // request.
      let cookie = path(origin, "status-cookie", [("status", "404"), ("header", "Set-Cookie: s=1")])
      for round in 1...2 {
        let response = try await get(proxy, cookie)
        #expect(response.status == 404 && response.header("Set-Cookie") == "s=1", "round \(round)")
        #expect(origin.requests(for: "status-cookie").count == 2 * round, "round \(round)")
      }
      // An error page that trickles past the read timeout: the status is kept, the answer is not.
      let slow = path(origin, "status-slow", [("status", "404"), ("delay-ms", "2500")])
      let response = try await get(proxy, slow)
      #expect(response.status == 404)
      #expect(Array(response.body) == TestOrigin.bytes(name: "status-slow", size: 64))
      #expect(origin.requests(for: "status-slow").count == 2, "asked again once the answer was late")
    }
  }

  /// Found by tools/soak: a 503 that outlasted the retries was relayed, the origin had recovered by then, and
  /// its 206 went out without a Content-Length.
  @Test func aRelayThatFindsTheOriginRecoveredKeepsItsFraming() async throws {
    try await withProxy(["--retries", "2"]) { origin, proxy, _ in
      // Three 500s use up the cache's request and its two retries; the relay, the fourth (a conditional request
      // is relayed with its conditions, not answered with the cache's last 500), gets the object.
      let url = origin.url(.flaky, "recovers", size: Self.size, query: "failures=3")
      let response = try await get(
        proxy, ProxyServer.proxyPath(for: url), [("Range", "bytes=1000-50999"), ("If-None-Match", "\"old\"")])
      #expect(response.status == 206)
      #expect(response.header("Content-Length") == "50000", "\(response.headers)")
      #expect(response.header("Content-Range") == "bytes 1000-50999/\(Self.size)")
      #expect(
        Array(response.body) == Array(TestOrigin.bytes(name: "recovers", size: Self.size)[1000..<51000]))
      #expect(response.header("Cache-Status") == "MediaCache; fwd=miss; detail=not-storable")
    }
  }

  @Test func aClientsConditionalRequestGetsA304WithTheStoredCachingFields() async throws {
    try await withProxy { origin, proxy, _ in
      let name = "conditional"
      let query = [("cache-control", "max-age=600"), ("header", "Expires: Fri, 01 Jan 2100 00:00:00 GMT")]
      expectBytes(try await get(proxy, path(origin, name, query)), name, "miss")
      let response = try await get(
        proxy, path(origin, name, query), [("If-None-Match", TestOrigin.etag(name: name))])
      #expect(response.status == 304 && response.bodyCount == 0)
      #expect(response.header("Cache-Control") == "max-age=600")
      #expect(response.header("Expires") == "Fri, 01 Jan 2100 00:00:00 GMT")
      #expect(response.header("Age") != nil && response.header("Content-Type") == nil)
    }
  }
}
