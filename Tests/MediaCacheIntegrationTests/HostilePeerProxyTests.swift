import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Hostile origins and hostile clients against the real `mediacache proxy` binary: every request ends within a
/// bounded time with a status (or, once the body has started, a cut connection), no wrong byte reaches a client
/// or the cache, the proxy's memory stays bounded, and a normal client keeps getting the right bytes.
@Suite(.serialized)
struct HostilePeerProxyTests {
  static let proxyArguments = [
    "--retries", "1", "--connect-timeout", "2", "--idle-timeout", "2", "--head-timeout", "3",
    "--client-timeout", "3",
  ]

  /// A normal object through the proxy, checked byte for byte.
  func expectNormalRead(_ proxy: ProxyProcess, _ origin: TestOrigin, _ name: String) throws {
    let url = origin.url(.normal, name, size: 500_000)
    let response = try proxy.request(ProxyServer.proxyPath(for: url))
    #expect(response.status == 200)
    let body = sameBytes(response.body, TestOrigin.bytes(name: name, size: 500_000))
    #expect(body.equal, "\(name): \(body)")
  }

  @Test func hostileOriginsGetAStatusAndOthersAreStillServed() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let hostile = try HostileOrigin.start()
    defer { hostile.stop() }
    let proxy = try await ProxyProcess(cache: directory.path, Self.proxyArguments)
    try expectNormalRead(proxy, origin, "warmup")
    let baseline = residentBytes(pid: proxy.child.pid)
    let size = 300_000
    for behaviour in HostileOrigin.Behaviour.allCases {
      let name = "proxy-\(behaviour.rawValue)"
      let query = behaviour == .endlessHeaders ? "interval-ms=20" : nil
      let url = hostile.url(behaviour, name, size: size, query: query)
      // A range within the real bytes first, then the whole object: a lying length can only be found out by a
      // read that goes past the real end.
      for range in ["bytes=0-131071", nil] {
        let started = Date()
        // A normal client reads another object meanwhile.
        let bystander = Task { try await blocking { try expectNormalRead(proxy, origin, "by-\(name)") } }
        let response = try await blocking {
          try proxy.request(ProxyServer.proxyPath(for: url), headers: range.map { [("Range", $0)] } ?? [])
        }
        try await bystander.value
        let elapsed = Date().timeIntervalSince(started)
        // Bounded, not hung: about 6 s by the timeouts (a silent origin: 3 s per attempt, one retry); 22 s was
        // seen on the 2-core CI machine with other suites running, so the bound is 45 s.
        #expect(elapsed < 45, "\(behaviour) \(range ?? "whole"): \(elapsed) s")
        let real = TestOrigin.bytes(name: name, size: size)
        switch response.status {
        case 502, 504:
          let text = String(decoding: response.body, as: UTF8.self)
          #expect(text.contains("origin"), "\(behaviour): \(text)")
          if behaviour == .silent || behaviour == .endlessHeaders {
            #expect(response.status == 504, "\(behaviour): \(text)")
          }
        case 200, 206:
          // The status went out before the origin misbehaved: what came is right, and the body is cut short
          // unless all of it was right (an overlong body read to its declared end).
          let prefix = Array(real[0..<min(real.count, response.body.count)])
          #expect(response.body.count <= real.count)
          #expect(response.body == prefix, "\(behaviour): wrong bytes reached the client")
          #expect(
            [.lyingLength, .overlongBody, .changingLength].contains(behaviour),
            "\(behaviour) \(range ?? "whole"): status \(response.status)")
        default:
          Issue.record("\(behaviour) \(range ?? "whole"): status \(response.status)")
        }
      }
    }
    try expectNormalRead(proxy, origin, "after")
    if let baseline, let now = residentBytes(pid: proxy.child.pid) {
      #expect(now - baseline < 64 << 20, "proxy RSS grew \((now - baseline) >> 20) MiB")
    }
    #expect(await proxy.stop().status == 0)
    // Nothing wrong is cached: fsck is clean and every listed chunk holds the real bytes.
    let check = try await run(binary("cache-fsck"), ["-n", directory.path])
    #expect(check.status == 0, "\(check.text)\(check.stderr)")
    let cache = try MediaCache(configuration: .init(directory: FilePath(directory.path)))
    for behaviour in HostileOrigin.Behaviour.allCases {
      let name = "proxy-\(behaviour.rawValue)"
      let query = behaviour == .endlessHeaders ? "interval-ms=20" : nil
      try expectNoWrongChunk(cache, hostile.url(behaviour, name, size: size, query: query), name, size)
    }
  }

  /// Malformed, overflowing, enormous and many-range `Range` headers: ignored (200 with the whole body) or 416,
  /// answered at once, and the proxy goes on serving.
  @Test func hostileRangeHeaders() async throws {
    try await withProxy(arguments: Self.proxyArguments) { proxy in
      let size = 200_000
      let url = proxy.origin.url(.normal, "ranges", size: size)
      let path = proxy.path(url)
      let whole = TestOrigin.bytes(name: "ranges", size: size)
      var manyRanges = "bytes=" + (0..<5000).map { "\($0 * 2)-\($0 * 2)" }.joined(separator: ",")
      let ignored = [
        "garbage", "bytes=abc", "bytes=-", "bytes=--5", "bytes=5-1", "bytes=-5-6", "bytes 0-5", "bytes0-5",
        "items=0-5", "bytes=99999999999999999999-", "bytes=0-99999999999999999999",
        "bytes=9223372036854775807-9223372036854775807", "bytes=-99999999999999999999", "bytes=0-5,,",
        "bytes=0-1,2-3",
        String(manyRanges.prefix(4000).split(separator: ",").dropLast().joined(separator: ",")),
        manyRanges, "bytes=" + String(repeating: "1", count: 60_000) + "-",
      ]
      for header in ignored {
        let started = Date()
        let response = try await proxy.request(path, headers: [("Range", header)])
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(response.status == 200, "Range: \(header.prefix(60)): \(response.status)")
        #expect(response.body == whole, "Range: \(header.prefix(60))")
      }
      let unsatisfiable = try await proxy.request(path, headers: [("Range", "bytes=999999999999999999-")])
      #expect(unsatisfiable.status == 416)
      #expect(unsatisfiable.header("Content-Range") == "bytes */\(size)")
      // A header past NIO's 80 KiB head limit (1 MiB of ranges) is refused on its own connection.
      manyRanges = "bytes=" + (0..<120_000).map { "\($0)-\($0)" }.joined(separator: ",")
      #expect(manyRanges.utf8.count > 1 << 20)
      try await expectRefused(proxy, headers: [("Range", manyRanges)], path: path)
      let good = try await proxy.request(path, headers: [("Range", "bytes=100-199")])
      #expect(good.status == 206)
      #expect(good.body == Array(whole[100..<200]))
    }
  }

  /// A request whose head is larger than the proxy accepts (enormous header, URL of hundreds of KiB): the
  /// connection is refused or closed, and the proxy serves the next request.
  @Test func enormousHeadsAndURLs() async throws {
    try await withProxy(arguments: Self.proxyArguments) { proxy in
      let url = proxy.origin.url(.normal, "heads", size: 100_000)
      let path = proxy.path(url)
      try await expectRefused(proxy, headers: [("X-Big", String(repeating: "a", count: 1 << 20))], path: path)
      try await expectRefused(proxy, headers: (0..<5000).map { ("X-Many-\($0)", "v") }, path: path)
      let longURL = url + "&pad=" + String(repeating: "p", count: 300 << 10)
      try await expectRefused(proxy, headers: [], path: proxy.path(longURL))
      // Below the head limit but past the proxy's 8 KiB origin URL limit: a 414 that says why.
      let response = try await proxy.request(
        proxy.path(url + "&pad=" + String(repeating: "p", count: 20 << 10)))
      #expect(response.status == 414)
      #expect(String(decoding: response.body, as: UTF8.self).contains("at most 8192"))
      let good = try await proxy.request(path)
      #expect(good.status == 200)
      #expect(good.body == TestOrigin.bytes(name: "heads", size: 100_000))
    }
  }

  /// Sends a request with a head past the proxy's limits: a 4xx or a closed connection, never a 2xx or 5xx.
  func expectRefused(_ proxy: ProxyFixture, headers: [(String, String)], path: String) async throws {
    let port = proxy.endpoint.port
    let outcome = try await blocking { () -> String in
      let connection = try RawHTTPConnection(port: port, timeoutSeconds: 15)
      defer { connection.close() }
      do {
        try connection.sendRequest("GET", path, headers: headers)
      } catch {
        return "closed while sending"
      }
      do {
        let response = try connection.readResponse()
        return "status \(response.status)"
      } catch {
        return "closed: \(error)"
      }
    }
    #expect(
      outcome.hasPrefix("closed") || outcome == "status 400" || outcome == "status 431", "\(outcome)")
    #expect(!outcome.contains("timed out"), "\(outcome)")
  }

  /// 300 connections that send nothing and 20 that send their head a byte every 100 ms: a normal client still
  /// gets the right bytes at once, the proxy's memory stays bounded, and after `--client-timeout` every one of
  /// them has been closed by the proxy.
  @Test func hundredsOfIdleAndSlowConnections() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let proxy = try await ProxyProcess(cache: directory.path, Self.proxyArguments)
    try expectNormalRead(proxy, origin, "warmup")
    let baseline = residentBytes(pid: proxy.child.pid)
    let idle = try (0..<300).map { _ in try RawHTTPConnection(port: proxy.port, timeoutSeconds: 15) }
    let stop = Atomic<Bool>(false)
    let slowClosed = Atomic<Int>(0)
    let slow = DispatchGroup()
    for index in 0..<20 {
      slow.enter()
      let port = proxy.port
      Thread.detachNewThread {
        defer { slow.leave() }
        guard let connection = try? RawHTTPConnection(port: port, timeoutSeconds: 15) else { return }
        let head =
          "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow-\(index): " + String(repeating: "s", count: 400)
        for byte in head {
          if stop.load(ordering: .relaxed) { return }
          do { try connection.send(String(byte)) } catch {
            slowClosed.add(1, ordering: .relaxed)
            return
          }
          usleep(100_000)
        }
      }
    }
    let started = Date()
    for index in 0..<3 { try expectNormalRead(proxy, origin, "meanwhile-\(index)") }
    #expect(Date().timeIntervalSince(started) < 20)
    if let baseline, let now = residentBytes(pid: proxy.child.pid) {
      #expect(now - baseline < 64 << 20, "proxy RSS grew \((now - baseline) >> 20) MiB with 320 connections")
    }
    // After the client timeout (3 s) the proxy has closed them all: a read sees the end of the stream.
    try await Task.sleep(for: .seconds(5))
    let closedIdle = idle.filter { (try? $0.readLine()) == nil }.count  // closed: each returns at once
    #expect(closedIdle == idle.count, "\(idle.count - closedIdle) idle connections still open")
    stop.store(true, ordering: .relaxed)
    _ = slow.wait(timeout: .now() + 10)
    #expect(slowClosed.load(ordering: .relaxed) == 20, "slow connections closed by the proxy")
    for connection in idle { connection.close() }
    try expectNormalRead(proxy, origin, "after")
    #expect(await proxy.stop().status == 0)
  }
}

/// Every chunk the cache lists for `url` holds the object's real bytes (`TestOrigin.bytes(name:size:)`), and
/// its recorded length, if any, is the real one.
func expectNoWrongChunk(
  _ cache: MediaCache, _ url: String, _ name: String, _ size: Int, checkLength: Bool = true
) throws {
  guard let manifest = try cache.store.readManifest(cache.objectID(for: url)) else { return }
  #expect(
    !checkLength || manifest.contentLength == nil || manifest.contentLength == Int64(size),
    "\(name): recorded length \(manifest.contentLength.map(String.init) ?? "nil") for an object of \(size)")
  let manager = try cache.assetDataManager(for: url, writable: false)
  defer { try? manager.close() }
  let real = Data(TestOrigin.bytes(name: name, size: size))
  for run in manifest.presentByteRanges.ranges {
    let upper = min(Int(run.upperBound), real.count)
    #expect(Int(run.upperBound) <= real.count, "\(name): chunks listed up to \(run.upperBound)")
    #expect(
      try manager.read(run.lowerBound..<Int64(upper)) == real[Int(run.lowerBound)..<upper],
      "\(name): bytes \(run)")
  }
}
