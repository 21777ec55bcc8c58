import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import NIOPosix
import Testing

/// `BlockingCallCheck` (`MEDIACACHE_BLOCKING_CHECK`): it tells the places apart, it stops a process that makes
/// a blocking call in a Swift task, and the proxy under many players makes none outside the I/O executor.
/// (Every proxy the tests start runs with the check in `trap` mode: see `ProxyProcess`.)
@Suite struct BlockingCallCheckTests {
  @Test func theCheckTellsTheIOExecutorATaskAnEventLoopAndAThreadApart() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    // A reader installs the event-loop test (the core does not know SwiftNIO).
    let cache = try await IOExecutor.shared.run {
      try MediaCache(configuration: .init(directory: FilePath(directory.path)))
    }
    _ = CachingReader(cache: cache)
    #expect(BlockingCallCheck.currentContext == .task)
    #expect(!BlockingCallCheck.currentContext.allowsBlocking)
    #expect(try await IOExecutor.shared.run { BlockingCallCheck.currentContext } == .ioExecutor)
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let onLoop = try await group.next().submit { BlockingCallCheck.currentContext }.get()
    try await group.shutdownGracefully()
    #expect(onLoop == .forbiddenThread)
    let onThread = await withCheckedContinuation { continuation in
      Thread { continuation.resume(returning: BlockingCallCheck.currentContext) }.start()
    }
    #expect(onThread == .otherThread)
    #expect(onThread.allowsBlocking)
  }

  /// The executor's threads carry its name where the system shows threads (a profile, `top -H`), so its work
  /// is not mistaken for Swift's cooperative pool's.
  @Test func theExecutorsThreadsAreNamedForTheSystem() async throws {
    let executor = IOExecutor(threads: 2, name: "TestIO")
    let name = try await executor.run { () throws -> String in
      #if os(Linux)
        try String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
          .trimmingCharacters(in: .whitespacesAndNewlines)
      #else
        Thread.current.name ?? ""
      #endif
    }
    #expect(name.hasPrefix("TestIO-"), "\(name)")
  }

  /// In another process (the check is process-wide): opening a cache in a task trips it, the same open on the
  /// executor does not, and without the variable nothing is checked.
  @Test func aBlockingCallInATaskStopsAProcessRunningWithTrap() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    func helper(_ place: String, _ mode: String?, _ name: String) async throws -> CommandResult {
      var environment = ProcessInfo.processInfo.environment
      environment["MEDIACACHE_BLOCKING_CHECK"] = mode
      return try await run(
        binary("mediacache-testhelper"), ["open-cache", directory.path + "/" + name, place],
        environment: environment)
    }
    let trapped = try await helper("in-task", "trap", "a")
    #expect(trapped.status != 0)
    #expect(trapped.text.isEmpty)
    #expect(trapped.stderr.contains("mediacache: blocking call "), "\(trapped.stderr)")
    #expect(trapped.stderr.contains(" on \(directory.path)/a"), "\(trapped.stderr)")
    #expect(trapped.stderr.contains(" in a Swift task (the cooperative pool)"), "\(trapped.stderr)")
    let logged = try await helper("in-task", "log", "b")
    #expect(logged.status == 0)
    #expect(logged.text == "opened\n")
    #expect(logged.stderr.contains("blocking call"), "\(logged.stderr)")
    for (place, mode, name) in [("on-executor", "trap", "c"), ("in-task", nil, "d")] {
      let quiet = try await helper(place, mode, name)
      #expect(quiet.status == 0, "\(place) \(mode ?? "off"): \(quiet.stderr)")
      #expect(quiet.text == "opened\n")
      #expect(!quiet.stderr.contains("blocking call"), "\(place) \(mode ?? "off"): \(quiet.stderr)")
    }
  }

  /// A file's times are checked too: an object's recency stamp (a `utimensat` of its manifest, which
  /// `noteAccess` makes on the caller's thread unless told to defer it) trips the check in a task and not on
  /// the executor. (The object need not exist: the check comes before the call.)
  @Test func aRecencyStampInATaskStopsAProcessRunningWithTrap() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    func helper(_ place: String, _ name: String) async throws -> CommandResult {
      var environment = ProcessInfo.processInfo.environment
      environment["MEDIACACHE_BLOCKING_CHECK"] = "trap"
      return try await run(
        binary("mediacache-testhelper"), ["touch-object", directory.path + "/" + name, place],
        environment: environment)
    }
    let trapped = try await helper("in-task", "a")
    #expect(trapped.status != 0)
    #expect(trapped.text.isEmpty)
    #expect(
      trapped.stderr.contains("mediacache: blocking call utimensat on \(directory.path)/a/objects/"),
      "\(trapped.stderr)")
    #expect(trapped.stderr.contains(".manifest in a Swift task (the cooperative pool)"), "\(trapped.stderr)")
    let quiet = try await helper("on-executor", "b")
    #expect(quiet.status == 0, "\(quiet.stderr)")
    #expect(quiet.text == "touched\n")
    #expect(!quiet.stderr.contains("blocking call"), "\(quiet.stderr)")
  }

  /// Every `mediacache` command that works on a cache on its own makes its blocking calls on the I/O
  /// executor, not in the command's task on the cooperative pool: run one after another on one cache with
  /// `trap`, each exits as it should, with its output, and no blocking call reported.
  @Test func theCacheCommandsMakeNoBlockingCallInATask() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.cleanup() }
    let cache = directory.file("cache")
    let key = "https://cdn.example/commands.mp4"
    let source = randomBytes(count: 300_000, seed: 11)
    try source.write(to: URL(fileURLWithPath: directory.file("source.mp4")))
    var environment = ProcessInfo.processInfo.environment
    environment["MEDIACACHE_BLOCKING_CHECK"] = "trap"
    let id = CacheKey(key).objectID.description
    // Each command, and a check of what it wrote to standard output.
    let commands: [([String], @Sendable (Data) -> Bool)] = [
      (
        ["import", key, directory.file("source.mp4"), "--content-type", "video/mp4"],
        { String(decoding: $0, as: UTF8.self).contains("complete 300000 bytes") }
      ),
      (["cat", key, "--range", "0-99"], { $0 == source.prefix(100) }),
      (["inspect", key], { String(decoding: $0, as: UTF8.self).contains(id) }),
      (["ls"], { String(decoding: $0, as: UTF8.self).contains("\(id)  complete 300000 bytes") }),
      (["status", key], { !$0.isEmpty }), (["stats"], { !$0.isEmpty }),
      (["pin", key], { String(decoding: $0, as: UTF8.self).contains("pinned") }),
      (["unpin", key], { String(decoding: $0, as: UTF8.self).contains("unpinned") }),
      (["purge", "--max-age", "0"], { _ in true }),
      (["import", key, directory.file("source.mp4")], { String(decoding: $0, as: UTF8.self).contains(id) }),
      (["rm", key], { String(decoding: $0, as: UTF8.self).contains("removed \(id)") }),
      (["clear"], { String(decoding: $0, as: UTF8.self).contains("freed") }),
    ]
    for (command, wrote) in commands {
      let result = try await run(
        binary("mediacache"), command + ["--cache", cache], environment: environment)
      #expect(result.status == 0, "\(command): \(result.stderr)")
      #expect(!result.stderr.contains("blocking call"), "\(command): \(result.stderr)")
      #expect(wrote(result.stdout), "\(command): \(result.text)")
    }
  }

  /// 48 clients at once on 12 cold objects (whole bodies, ranges, suffixes, HEAD, metrics), then the same
  /// warm: every byte right, and the proxy (running with `trap`) still up and exiting 0.
  @Test func manyPlayersColdAndWarmMakeNoBlockingCallOutsideTheExecutor() async throws {
    try await withProxy { proxy in
      let size = 1_500_000
      let names = (0..<12).map { "blocking-check-\($0)" }
      for warm in [false, true] {
        try await withThrowingTaskGroup(of: Void.self) { group in
          for (index, name) in names.enumerated() {
            let path = proxy.path(proxy.origin.url(index % 3 == 0 ? .slow : .normal, name, size: size))
            let whole = TestOrigin.bytes(name: name, size: size)
            group.addTask {
              let response = try await proxy.request(path)
              #expect(response.status == 200)
              #expect(sameBytes(response.body, whole).equal, "\(name) warm \(warm)")
            }
            group.addTask {
              let response = try await proxy.request(path, headers: [("Range", "bytes=700000-1299999")])
              #expect(response.status == 206)
              #expect(
                sameBytes(response.body, Array(whole[700_000..<1_300_000])).equal, "\(name) warm \(warm)")
            }
            group.addTask {
              let response = try await proxy.request(path, headers: [("Range", "bytes=-5000")])
              #expect(response.status == 206)
              #expect(sameBytes(response.body, Array(whole[(size - 5000)...])).equal, "\(name) warm \(warm)")
            }
            group.addTask {
              let response = try await proxy.request(path, method: "HEAD")
              #expect(response.status == 200)
              _ = try await proxy.request("/metrics")
            }
          }
          try await group.waitForAll()
        }
      }
      #expect(try await proxy.metric("mediacache_proxy_requests_total{code=\"5xx\"}") == 0)
    }
  }
}
