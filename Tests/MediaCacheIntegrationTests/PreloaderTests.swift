import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Synchronization
import Testing

/// `Preloader` against a real origin on 127.0.0.1 and a real cache: the window after the current item, nearer
/// items first, cancelling what leaves the window, re-prioritising when a nearer item appears, the byte
/// budget, and targets in seconds through the MP4 planner. What the origin was asked for is read from its log.
@Suite(.serialized)
struct PreloaderTests {
  /// Runs `body` with a reader over a fresh cache (64 KiB chunks) and `origin`.
  func withReader(
    _ origin: TestOrigin, _ body: (CachingReader, MediaCache) async throws -> Void
  ) async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let cache = try MediaCache(
      configuration: .init(directory: FilePath(directory.file("cache")), chunkSize: 64 << 10))
    let client = OriginClient()
    do {
      try await body(CachingReader(cache: cache, client: client), cache)
    } catch {
      try? await client.shutdown()
      throw error
    }
    try await client.shutdown()
  }

  /// Bytes the origin sent for object `name`.
  func sent(_ origin: TestOrigin, _ name: String) -> Int {
    origin.allRequests().filter { $0.name == name }.reduce(0) { $0 + $1.bodyBytesSent }
  }

  @Test func theItemsAfterTheCurrentOneArePreloadedNearestFirst() async throws {
    try await withOrigin { origin in
      try await withReader(origin) { reader, _ in
        let items = ["a", "b", "c", "d", "e"].map { origin.url(.normal, "order-\($0)", size: 1 << 20) }
        let policy = Preloader.Policy(targets: [.bytes(256 << 10), .bytes(128 << 10), .bytes(128 << 10)])
        let preloader = Preloader(reader: reader, policy: policy)
        await preloader.update(items: items, current: 0)
        await preloader.waitUntilIdle()
        let status = await preloader.status()
        #expect(status.map(\.distance) == [1, 2, 3])
        #expect(status.map(\.state) == [.done, .done, .done], "\(status)")
        #expect(status.map(\.fetchedBytes) == [256 << 10, 128 << 10, 128 << 10])
        // Nearest first, and nothing of the current item or of the one past the window.
        let names = origin.allRequests().map(\.name)
        #expect(names == ["order-b", "order-c", "order-d"], "\(names)")
        #expect(sent(origin, "order-b") == 256 << 10 && sent(origin, "order-d") == 128 << 10)
      }
    }
  }

  @Test func anItemThatLeavesTheWindowIsCancelledAtOnce() async throws {
    try await withOrigin { origin in
      try await withReader(origin) { reader, cache in
        // b: 4 MiB at 16 KiB every 160 ms (41 s), so that a loaded machine still sees it part-way (1 MiB at that
        // rate once had 768 KiB sent before the loop below saw its first 64 KiB: a test process starved for 7 s);
        // c, which must finish here, 1 MiB at 16 KiB every 10 ms.
        let items = [("a", 160, 1 << 20), ("b", 160, 4 << 20), ("c", 10, 1 << 20)].map {
          origin.url(.slow, "scroll-\($0.0)", size: $0.2, query: "delay-ms=\($0.1)")
        }
        let preloader = Preloader(reader: reader, policy: .init(targets: [.bytes(4 << 20)]))
        await preloader.update(items: items, current: 0)
        // b is being fetched and has some bytes (its planning looks at the cache on the I/O executor first).
        for _ in 0..<1500 where await (preloader.status().first?.fetchedBytes ?? 0) < 64 << 10 {
          try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await preloader.status().first?.state == .fetching)
        // The user swipes to b: b is being played, c is next.
        let atSwipe = sent(origin, "scroll-b")
        await preloader.update(items: items, current: 1)
        #expect(await preloader.status().map(\.url) == [items[2]])
        await preloader.waitUntilIdle()
        #expect(await preloader.status().first?.state == .done)
        #expect(sent(origin, "scroll-c") == 1 << 20)
        // b's request stopped soon after the swipe, far short of its 4 MiB: the abandoned request may take a
        // quarter second more, and a loaded machine may take a second or two to act (256 KiB are 2.5 s of b).
        // Counted from the swipe, since on a loaded machine the loop above may see b's first chunk late (CI once
        // had 656 KiB of b in all, measured from b's start).
        _ = try await origin.waitForCompletedRequests(for: "scroll-b", count: 1, timeout: .seconds(30))
        let stopped = sent(origin, "scroll-b")
        #expect(stopped > 0 && stopped < 4 << 20, "b: \(stopped) bytes")
        #expect(stopped - atSwipe < 256 << 10, "b: \(atSwipe) bytes at the swipe, \(stopped) in all")
        // What b fetched stays cached.
        let status = try await cache.status(for: items[1])
        #expect(status.cachedBytes > 0)
      }
    }
  }

  @Test func aNearerItemGoesFirstAndTheOtherResumes() async throws {
    try await withOrigin { origin in
      try await withReader(origin) { reader, _ in
        // 16 KiB every 160 ms (z: 5.1 s). b sends its first chunk at once, then 16 KiB every 400 ms (11.2 s more),
        // so that a loaded machine still sees it part-way: when b trickled from its first byte (at 40 ms, then 80,
        // then 160), its origin sent all of it, once in a full local run at 160 ms, before the update below.
        let url = { (name: String) in
          origin.url(
            .slow, "near-\(name)", size: 512 << 10,
            query: name == "b" ? "burst=\(64 << 10)&delay-ms=400" : "delay-ms=160")
        }
        let preloader = Preloader(
          reader: reader, policy: .init(targets: [.bytes(512 << 10), .bytes(512 << 10)]))
        await preloader.update(items: [url("a"), url("b")], current: 0)
        // Until b has a chunk (64 KiB) cached, so that it resumes past it (however slow the machine).
        for _ in 0..<1000 where await (preloader.status().first?.fetchedBytes ?? 0) < 64 << 10 {
          try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await preloader.status().first?.state == .fetching)
        // An item is inserted before b: it is fetched first; b resumes after it from where it stopped.
        await preloader.update(items: [url("a"), url("z"), url("b")], current: 0)
        await preloader.waitUntilIdle()
        #expect(await preloader.status().map(\.state) == [.done, .done])
        let requests = origin.allRequests().filter { $0.name.hasPrefix("near-") }
        let names = requests.map(\.name)
        #expect(names.first == "near-b" && names.last == "near-b" && names.contains("near-z"), "\(names)")
        let resumed = try #require(requests.last?.range)
        #expect(!resumed.hasPrefix("bytes=0-"), "b started again from 0: \(requests)")
        // b's bytes came once, z's once.
        #expect(sent(origin, "near-z") == 512 << 10)
        #expect(sent(origin, "near-b") < (512 << 10) + (320 << 10), "\(requests)")
      }
    }
  }

  /// A background fetch already running stops reading from its origin while a player of the same reader waits
  /// for one, and goes on once the player has its bytes: 800 KiB/s of background bytes would otherwise come in
  /// beside the player's 32 KiB per second.
  @Test func aRunningPrefetchPausesWhileAPlayerWaits() async throws {
    try await withOrigin { origin in
      try await withReader(origin) { reader, _ in
        let samples = Mutex<[(ContinuousClock.Instant, Int64)]>([])
        let background = Task {
          // 16 KiB every 20 ms: 4 MiB take about 5 s.
          let url = origin.url(.slow, "paused-bg", size: 4 << 20, query: "delay-ms=20")
          for try await progress in reader.prefetch(url) {
            samples.withLock { $0.append((.now, progress.cachedBytes)) }
          }
        }
        defer { background.cancel() }
        for _ in 0..<300 where (samples.withLock { $0.last?.1 } ?? 0) < 64 << 10 {
          try await Task.sleep(for: .milliseconds(10))
        }
        // The player's object comes 16 KiB every half second: it waits nearly all the time for 2.5 s.
        let player = origin.url(.slow, "paused-player", size: 96 << 10, query: "delay-ms=500")
        let began = ContinuousClock.now
        let played = Task {
          let bytes = try await reader.read(player)
          defer { bytes.close() }
          var count = 0
          for try await piece in bytes { count += piece.count }
          return count
        }
        #expect(try await played.value == 96 << 10)
        let ended = ContinuousClock.now
        // What the background fetch cached while the player waited (its first and last quarter second left
        // out: the pause takes effect at the next part, and the player's last piece ends its wait).
        let during = samples.withLock { list in
          list.filter { $0.0 > began + .milliseconds(250) && $0.0 < ended - .milliseconds(250) }.map(\.1)
        }
        #expect(during.count >= 3, "samples while the player waited: \(during)")
        let grown = (during.last ?? 0) - (during.first ?? 0)
        #expect(grown < 128 << 10, "the background fetch cached \(grown) bytes while the player waited")
        try await background.value
        #expect(samples.withLock { $0.last?.1 } == 4 << 20)
      }
    }
  }

  /// A player that joins a background fetch paused for another player's wait is not held by that pause: the
  /// fetch is its now (promoted) and goes on at once.
  @Test func aPlayerJoiningAPausedPrefetchIsNotHeldByThePause() async throws {
    try await withOrigin { origin in
      try await withReader(origin) { reader, _ in
        let cached = Mutex<Int64>(0)
        let url = origin.url(.slow, "joined-bg", size: 4 << 20, query: "delay-ms=20")
        let background = Task {
          for try await progress in reader.prefetch(url) { cached.withLock { $0 = progress.cachedBytes } }
        }
        defer { background.cancel() }
        for _ in 0..<300 where cached.withLock({ $0 }) < 64 << 10 {
          try await Task.sleep(for: .milliseconds(10))
        }
        // Another player waits for its origin for about 6 s: the background fetch pauses.
        let stalled = Task {
          let bytes = try await reader.read(
            origin.url(.slow, "joined-stalled", size: 192 << 10, query: "delay-ms=500"))
          defer { bytes.close() }
          for try await _ in bytes {}
        }
        defer { stalled.cancel() }
        try await Task.sleep(for: .milliseconds(400))
        // A player now reads the paused object 256 KiB past what was cached: it joins the fetch.
        let target = cached.withLock { $0 } + (256 << 10)
        let began = ContinuousClock.now
        let bytes = try await reader.read(url, range: .bounded(0..<target))
        var count: Int64 = 0
        for try await piece in bytes { count += Int64(piece.count) }
        bytes.close()
        let seconds = (ContinuousClock.now - began) / .seconds(1)
        #expect(count == target)
        // The same 256 KiB of another object, read by a player alone while the other still waits: what the
        // joining player's take unheld on this machine now (a local run with the whole suite beside it took
        // 1.35 s where 0.3 s is usual, against the fixed bound of 1.2 s this replaced).
        let controlStart = ContinuousClock.now
        let control = try await reader.read(
          origin.url(.slow, "joined-control", size: 4 << 20, query: "delay-ms=20"),
          range: .bounded(0..<(256 << 10)))
        for try await _ in control {}
        control.close()
        let alone = (ContinuousClock.now - controlStart) / .seconds(1)
        // 256 KiB at the origin's 800 KiB/s take a third of a second (about 0.3 s measured); held by the pause
        // (2 s at most per part) it took 1.6 to 1.9 s: at least 1.3 s more than alone.
        #expect(seconds < alone + 0.9, "the joining player took \(seconds) s, a player alone \(alone) s")
      }
    }
  }

  /// While a player waits for an origin's bytes, the preloader starts nothing: the player's object comes 16 KiB
  /// every half second, so it is nearly always waiting; once it is done, the preload runs.
  @Test func aStalledPlayerGoesFirst() async throws {
    try await withOrigin { origin in
      try await withReader(origin) { reader, _ in
        // 16 KiB every 2 s: the player waits about 8 s, long past the look below on a loaded machine too.
        let player = origin.url(.slow, "stalled-player", size: 64 << 10, query: "delay-ms=2000")
        let playing = Task {
          let bytes = try await reader.read(player)
          defer { bytes.close() }
          var count = 0
          for try await piece in bytes { count += piece.count }
          return count
        }
        for _ in 0..<200 where reader.playersWaitingForOrigin == 0 {
          try await Task.sleep(for: .milliseconds(10))
        }
        #expect(reader.playersWaitingForOrigin > 0)
        let items = ["a", "b"].map { origin.url(.normal, "stalled-\($0)", size: 256 << 10) }
        let preloader = Preloader(reader: reader, policy: .init(targets: [.bytes(256 << 10)]))
        await preloader.update(items: items, current: 0)
        try await Task.sleep(for: .milliseconds(800))
        // The player is still waiting (its 64 KiB take 8 s): nothing of the preload was asked for yet.
        #expect(origin.allRequests().filter { $0.name == "stalled-b" }.isEmpty, "\(origin.allRequests())")
        #expect(try await playing.value == 64 << 10)
        await preloader.waitUntilIdle()
        #expect(await preloader.status().map(\.state) == [.done])
        #expect(sent(origin, "stalled-b") == 256 << 10)
      }
    }
  }

  /// An item being fetched whose target grows (it comes nearer: 2 s to 5 s, here 192 KiB to 512 KiB) is planned
  /// again and fetched to its new target, not marked done at the old one.
  @Test func anItemComingNearerGetsItsNewTarget() async throws {
    try await withOrigin { origin in
      try await withReader(origin) { reader, _ in
        // b, after its first 64 KiB, comes 16 KiB every 300 ms: its first target (192 KiB) is 2.4 s away when it
        // is looked at, time for a loaded machine's test task to get there first.
        let url = { (name: String) in
          origin.url(
            .slow, "retarget-\(name)", size: 1 << 20,
            query: name == "b" ? "burst=65536&delay-ms=300" : "delay-ms=40")
        }
        let items = ["a", "b", "c"].map(url)
        let preloader = Preloader(
          reader: reader, policy: .init(targets: [.bytes(512 << 10), .bytes(192 << 10)]))
        // a is played, c is next (512 KiB, fetched first), b after it (192 KiB).
        await preloader.update(items: [items[0], items[2], items[1]], current: 0)
        for _ in 0..<1000 where await (preloader.status().last?.fetchedBytes ?? 0) < 64 << 10 {
          try await Task.sleep(for: .milliseconds(10))
        }
        // b is being fetched for 192 KiB at distance 2 when it becomes the next item.
        #expect(await preloader.status().last?.state == .fetching)
        await preloader.update(items: [items[0], items[1], items[2]], current: 0)
        await preloader.waitUntilIdle()
        let status = await preloader.status()
        #expect(status.map(\.state) == [.done, .done], "\(status)")
        #expect(status.first?.target == .bytes(512 << 10))
        #expect(sent(origin, "retarget-b") >= 512 << 10, "\(origin.allRequests())")
      }
    }
  }

  @Test func anItemPastTheByteBudgetIsNotFetched() async throws {
    try await withOrigin { origin in
      try await withReader(origin) { reader, _ in
        let items = ["a", "b", "c"].map { origin.url(.normal, "budget-\($0)", size: 1 << 20) }
        let policy = Preloader.Policy(targets: [.bytes(256 << 10), .bytes(128 << 10)], byteBudget: 300 << 10)
        let preloader = Preloader(reader: reader, policy: policy)
        await preloader.update(items: items, current: 0)
        await preloader.waitUntilIdle()
        #expect(await preloader.status().map(\.state) == [.done, .overBudget])
        #expect(sent(origin, "budget-c") == 0)
        // Once b is played, c fits.
        await preloader.update(items: items, current: 1)
        await preloader.waitUntilIdle()
        #expect(await preloader.status().map(\.state) == [.done])
        #expect(sent(origin, "budget-c") == 256 << 10)
      }
    }
  }

  @Test func secondsOfAnMP4AreWhatItsSampleTablesSay() async throws {
    try await withFileOrigin { origin in
      try await withReader(origin) { reader, _ in
        let items = ["faststart.mp4", "tail-index.mp4"].map { origin.url(file: $0) }
        let preloader = Preloader(reader: reader, policy: .init(targets: [.seconds(2)]))
        await preloader.update(items: items, current: 0)
        await preloader.waitUntilIdle()
        let status = try #require(await preloader.status().first)
        #expect(status.state == .done)
        // The same plan as `mediacache preload --seconds 2` (PreloadPlaybackTests): 79,300 bytes.
        #expect(status.plannedBytes == 79_300)
      }
    }
  }
}
