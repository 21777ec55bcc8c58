import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

@testable import mediacache

/// `purge`, `stats`, `--ignore-query` and the help of every subcommand, run through the built binary.
@Suite struct CLIMaintenanceTests {
  let mediacache = binary("mediacache")

  /// What `stats --json` prints for `cache`.
  func statistics(_ cache: String) async throws -> CacheStatistics {
    try await decodeReport(CacheStatistics.self, try run(mediacache, ["stats", "--cache", cache, "--json"]))
  }

  /// Imports `keys` (`bytes` each) and stamps their last access an hour apart, the first the oldest (5 h ago
  /// for five keys).
  func fill(_ cache: String, keys: [String], bytes: Int, dir: TemporaryDirectory) async throws {
    try randomBytes(count: bytes, seed: 11).write(to: URL(fileURLWithPath: dir.file("src")))
    for key in keys {
      let imported = try await run(mediacache, ["import", "--cache", cache, key, dir.file("src")])
      #expect(imported.status == 0, "\(imported.stderr)")
    }
    try stamp(cache, keys: keys)
  }

  func stamp(_ cache: String, keys: [String]) throws {
    let store = try ShardedStore(root: cache)
    let now = Date()
    for (index, key) in keys.enumerated() {
      try FileManager.default.setAttributes(
        [.modificationDate: now.addingTimeInterval(-Double(keys.count - index) * 3600)],
        ofItemAtPath: store.paths(for: CacheKey(key).objectID).manifest)
    }
  }

  @Test func purgeEvictsOldestFirstAndKeepsPinned() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let keys = (0..<5).map { "https://cdn.example.com/v\($0).mp4" }
    try await fill(cache, keys: keys, bytes: 300_000, dir: dir)
    #expect(try await run(mediacache, ["pin", "--cache", cache, keys[0]]).status == 0)
    try stamp(cache, keys: keys)  // pinning rewrote keys[0]'s manifest: make it the oldest again
    let store = try ShardedStore(root: cache)
    let perObject = try store.diskUsage(CacheKey(keys[1]).objectID)
    #expect(perObject >= 300_000)

    // Room for three objects: the two oldest unpinned ones go, the pinned oldest stays.
    let purge = try await run(
      mediacache, ["purge", "--cache", cache, "--max-size", "\(perObject * 3)", "--json"])
    #expect(purge.status == 0, "\(purge.stderr)")
    let report = try decodeReport(CompactionReport.self, purge)
    #expect(report.objectsScanned == 5)
    #expect(report.evictedCount == 2)
    #expect(report.pinnedKept == 1)
    #expect(report.skippedBusy == 0)
    #expect(report.bytesFreed == perObject * 2)
    #expect(report.bytesAfter <= perObject * 3)
    #expect(report.removed.map(\.id) == [keys[1], keys[2]].map { CacheKey($0).objectID })
    #expect(report.removed.allSatisfy { $0.reason == .size && $0.bytes == perObject })
    #expect(report.evicted == [.size: 2])
    #expect(!report.dryRun && !report.incomplete && report.errors.isEmpty)
    for (key, state) in zip(keys, ["complete", "none", "none", "complete", "complete"]) {
      let status = try await decodeReport(
        MediaCache.Status.self, try run(mediacache, ["status", "--cache", cache, key, "--json"]))
      #expect(status.stateName == state, "\(key)")
    }

    // Under the limit: nothing to do, said in one line.
    let again = try await run(mediacache, ["purge", "--cache", cache, "--max-size", "1G"])
    #expect(again.status == 0, "\(again.stderr)")
    #expect(again.text.hasPrefix("evicted 0 of 3 objects, freed 0 bytes;"), "\(again.text)")
    #expect(again.text.contains("kept 0 pinned, skipped 0 busy"))
    #expect(again.text.split(separator: "\n").count == 1)

    // By age: keys[3] was last used 2 h ago, keys[4] 1 h ago; the pinned keys[0] (5 h) stays.
    let byAge = try await run(mediacache, ["purge", "--cache", cache, "--max-age", "90m"])
    #expect(byAge.status == 0, "\(byAge.stderr)")
    #expect(
      byAge.text.hasPrefix("evicted 1 of 3 objects (age 1), freed \(perObject) bytes;"), "\(byAge.text)")
    #expect(byAge.text.contains("kept 1 pinned"))
    #expect(try await run(mediacache, ["status", "--cache", cache, keys[3]]).text == "none\n")
    #expect(try await run(mediacache, ["status", "--cache", cache, keys[4]]).text.hasPrefix("complete"))

    // Down to nothing: only the pinned object is left.
    let all = try await decodeReport(
      CompactionReport.self, try run(mediacache, ["purge", "--cache", cache, "--max-size", "0", "--json"]))
    #expect(all.evictedCount == 1)
    #expect(all.pinnedKept == 1)
    // Kept by the age limit and then by the size limit: one pinned object, counted once (it was counted twice).
    let both = try await decodeReport(
      CompactionReport.self,
      try run(mediacache, ["purge", "--cache", cache, "--max-size", "0", "--max-age", "0", "--json"]))
    #expect(both.evictedCount == 0 && both.objectsScanned == 1)
    #expect(both.pinnedKept == 1)
    #expect(try await run(mediacache, ["status", "--cache", cache, keys[0]]).text.hasPrefix("complete"))
  }

  @Test func purgeRefusesBadLimitsAndMissingCaches() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let cases: [([String], String)] = [
      (["--max-size", "garbage"], "'garbage' is not a size"),
      (["--max-size=-5M"], "cannot be negative"),
      (["--max-size", "1.5"], "whole number"),
      (["--max-size", "12Q"], "unknown unit 'Q'"),
      (["--max-size", "99999999T"], "too large"),
      (["--max-size", "1e9"], "unknown unit"),
      (["--max-age", "soon"], "'soon' is not a duration"),
      // Past what `Duration` holds: refused, where it trapped (SIGILL).
      (["--max-age", "1e30"], "'1e30' is not a duration"), (["--max-age", "inf"], "'inf' is not a duration"),
      ([], "give --max-size SIZE, --max-age SECONDS or both"),
    ]
    for (arguments, message) in cases {
      let result = try await run(mediacache, ["purge", "--cache", cache] + arguments)
      #expect(result.status == 64, "\(arguments)")
      #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
    }
    // A cache that does not exist: exit 4 (not a usable cache directory), nothing created.
    let missing = try await run(mediacache, ["purge", "--cache", cache, "--max-size", "1G"])
    #expect(missing.status == 4)
    #expect(missing.stderr == "mediacache: no cache at \(cache): nothing to purge\n")
    #expect(!FileManager.default.fileExists(atPath: cache))
    // A directory that is not a cache: exit 4 too.
    try FileManager.default.createDirectory(atPath: dir.file("foreign"), withIntermediateDirectories: true)
    try Data("x".utf8).write(to: URL(fileURLWithPath: dir.file("foreign/notes")))
    let foreign = try await run(mediacache, ["purge", "--cache", dir.file("foreign"), "--max-size", "1G"])
    #expect(foreign.status == 4)
    #expect(foreign.stderr.contains("not a MediaCache directory"))
  }

  /// The proxy's timeouts: durations no `Duration` can hold trapped (SIGILL) at start instead of being refused.
  @Test func proxyRefusesTimeoutsNoDurationHolds() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    for arguments in [
      ["--connect-timeout", "1e30"], ["--client-timeout", "inf"], ["--head-timeout", "nan"],
      ["--idle-timeout", "0"],
    ] {
      let result = try await run(mediacache, ["proxy", "--cache", dir.file("cache")] + arguments)
      #expect(result.status == 64, "\(arguments): \(result.status) \(result.stderr)")
      #expect(result.stderr.contains(arguments[0] + " must be positive"), "\(arguments): \(result.stderr)")
    }
    #expect(!FileManager.default.fileExists(atPath: dir.file("cache")))
  }

  @Test func statsCountsObjectsByState() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let empty = try await decodeReport(
      CacheStatistics.self, try run(mediacache, ["stats", "--cache", cache, "--json"]))
    #expect(empty == CacheStatistics())
    #expect(!FileManager.default.fileExists(atPath: cache))
    // An empty directory is no cache yet, as a missing one (it was refused as "not empty", exit 4).
    try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: false)
    let emptyDirectory = try await run(mediacache, ["stats", "--cache", cache, "--json"])
    #expect(emptyDirectory.status == 0, "\(emptyDirectory.stderr)")
    #expect(try decodeReport(CacheStatistics.self, emptyDirectory) == CacheStatistics())
    #expect(try await run(mediacache, ["ls", "--cache", cache, "--json"]).text == "[]\n")
    #expect(try FileManager.default.contentsOfDirectory(atPath: cache).isEmpty)
    try FileManager.default.removeItem(atPath: cache)

    try randomBytes(count: 200_000, seed: 12).write(to: URL(fileURLWithPath: dir.file("src")))
    for key in ["a", "b", "c"] {
      #expect(try await run(mediacache, ["import", "--cache", cache, key, dir.file("src")]).status == 0)
    }
    let partial = try await run(
      mediacache,
      [
        "import", "--cache", cache, "p", dir.file("src"), "--range", "0-65535", "--length", "200000",
        "--chunk-size", "65536",
      ])
    #expect(partial.status == 0, "\(partial.stderr)")
    #expect(try await run(mediacache, ["pin", "--cache", cache, "b"]).status == 0)

    let stats = try await decodeReport(
      CacheStatistics.self, try run(mediacache, ["stats", "--cache", cache, "--json"]))
    #expect(stats.objects == 4)
    #expect(stats.complete == 3)
    #expect(stats.partial == 1)
    #expect(stats.empty == 0)
    #expect(stats.unreadable == 0)
    #expect(stats.pinned == 1)
    #expect(stats.cachedBytes == 3 * 200_000 + 65536)
    let store = try ShardedStore(root: cache)
    let disk = try ["a", "b", "c", "p"].reduce(Int64(0)) { $0 + (try store.diskUsage(CacheKey($1).objectID)) }
    #expect(stats.diskBytes == disk)

    let line = try await run(mediacache, ["stats", "--cache", cache])
    #expect(
      line.text
        == "4 objects: 3 complete, 1 partial, 0 empty, 0 unreadable; 1 pinned; \(3 * 200_000 + 65536) bytes cached, "
        + "\(disk) bytes on disk\n")
  }

  @Test func ignoredQueryItemsMakeSignedURLsShareOneObject() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let source = randomBytes(count: 70_000, seed: 13)
    try source.write(to: URL(fileURLWithPath: dir.file("src")))
    let signedA = "https://cdn.example.com/v.mp4?id=7&Expires=100&Signature=aaa"
    let signedB = "https://cdn.example.com/v.mp4?Signature=bbb&id=7&expires=200"
    let ignore = ["--ignore-query", "Expires", "--ignore-query", "signature"]

    #expect(
      try await run(mediacache, ["import", "--cache", cache, signedA, dir.file("src")] + ignore).status == 0)
    // Without the option the other signature is another object; with it, the same one.
    #expect(try await run(mediacache, ["status", "--cache", cache, signedB]).text == "none\n")
    #expect(
      try await run(mediacache, ["status", "--cache", cache, signedB] + ignore).text
        == "complete 70000 bytes\n")
    #expect(try await run(mediacache, ["cat", "--cache", cache, signedB] + ignore).stdout == source)
    let inspect = try await decodeReport(
      ObjectDescription.self, try run(mediacache, ["inspect", "--cache", cache, signedB, "--json"] + ignore))
    #expect(inspect.objectID == CacheKey("https://cdn.example.com/v.mp4?id=7").objectID)
    #expect(try await run(mediacache, ["pin", "--cache", cache, signedB] + ignore).status == 0)
    #expect(try await statistics(cache).pinned == 1)
    #expect(try await run(mediacache, ["unpin", "--cache", cache, signedA] + ignore).status == 0)
    #expect(try await statistics(cache).objects == 1)
    let removed = try await run(mediacache, ["rm", "--cache", cache, signedB] + ignore)
    #expect(removed.status == 0, "\(removed.stderr)")
    #expect(try await statistics(cache).objects == 0)
    // A missing object named through the key function: exit 2 naming the id of the reduced key.
    let gone = try await run(mediacache, ["rm", "--cache", cache, signedA] + ignore)
    #expect(gone.status == 2)
    #expect(gone.stderr.contains(CacheKey("https://cdn.example.com/v.mp4?id=7").objectID.description))
  }

  @Test func fetchWithIgnoredQueryAsksTheOriginOnce() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let origin = try await TestOrigin.start()
    defer { Task { try? await origin.shutdown() } }
    let cache = dir.file("cache")
    let size = 300_000
    let first = origin.url(.normal, "signed", size: size, query: "Expires=1&Signature=one")
    let second = origin.url(.normal, "signed", size: size, query: "Expires=2&Signature=two")
    let ignore = ["--ignore-query", "Expires", "--ignore-query", "Signature"]
    let fetched = try await run(mediacache, ["fetch", "--cache", cache, first] + ignore)
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let requests = origin.requests(for: "signed").count
    #expect(requests >= 1)
    let again = try await run(mediacache, ["fetch", "--cache", cache, second] + ignore)
    #expect(again.status == 0, "\(again.stderr)")
    #expect(again.text.contains("fetched 0 bytes from the origin"), "\(again.text)")
    #expect(origin.requests(for: "signed").count == requests)
    #expect(
      try await run(mediacache, ["cat", "--cache", cache, second] + ignore).stdout
        == Data(TestOrigin.bytes(name: "signed", size: size)))
  }

  /// Every subcommand's help exits 0 and shows its abstract; those with a discussion give an example.
  @Test func helpOfEverySubcommand() async throws {
    func words(_ text: String) -> String {
      text.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
    }
    let top = try await run(mediacache, ["--help"])
    #expect(top.status == 0)
    #expect(words(top.text).contains(words(MediaCacheCommand.configuration.abstract)))
    let subcommands = MediaCacheCommand.configuration.subcommands
    #expect(subcommands.count >= 13)
    for command in subcommands {
      let name = try #require(command.configuration.commandName)
      let help = try await run(mediacache, [name, "--help"])
      #expect(help.status == 0, "\(name): \(help.stderr)")
      #expect(words(help.text).contains(words(command.configuration.abstract)), "\(name): \(help.text)")
      #expect(help.text.contains("USAGE: mediacache \(name)"), "\(name)")
      #expect(words(top.text).contains(name), "\(name) is not listed in mediacache --help")
      if name != "proxy" {
        #expect(help.text.contains("Example"), "\(name) has no example")
        #expect(help.text.contains("--cache"), "\(name)")
      }
    }
    for name in ["status", "cat", "rm", "pin", "unpin", "inspect", "import"] {
      let help = try await run(mediacache, [name, "--help"])
      #expect(help.text.contains("<KEY-OR-URL>"), "\(name)")
      #expect(help.text.contains("--ignore-query <NAME>"), "\(name)")
    }
  }
}

/// The size argument `purge` and `proxy` take, parsed in process.
@Suite struct CLIByteSizeArgumentTests {
  @Test func acceptsBytesAndBinaryUnits() throws {
    let cases: [(String, Int64)] = [
      ("1073741824", 1_073_741_824), ("0", 0), ("512K", 512 << 10), ("512k", 512 << 10), ("500M", 500 << 20),
      ("2G", 2 << 30), ("1.5G", 3 << 29), ("1T", 1 << 40), ("2GB", 2 << 30), ("2GiB", 2 << 30),
      ("2gib", 2 << 30),
      ("100B", 100), ("0.5K", 512), (" 3M ", 3 << 20),
    ]
    for (text, bytes) in cases {
      #expect(try ByteSizeArgument.parse(text).bytes == bytes, "\(text)")
      #expect(ByteSizeArgument(argument: text)?.bytes == bytes, "\(text)")
    }
  }

  @Test func refusesNegativesAndGarbageSayingWhy() {
    let cases: [(String, String)] = [
      ("-1", "cannot be negative"), ("-2G", "cannot be negative"), ("", "empty"), ("G", "expected a number"),
      ("abc", "expected a number"), ("1.2.3M", "expected a number"), ("5X", "unknown unit 'X'"),
      ("1e9", "unknown unit"),
      ("0x10", "unknown unit"), ("inf", "expected a number"), ("nan", "expected a number"),
      ("1.5", "whole number"),
      ("10PB", "unknown unit"), ("9000000T", "too large"), ("1 G", "unknown unit"),
    ]
    for (text, reason) in cases {
      #expect(ByteSizeArgument(argument: text) == nil, "\(text)")
      do {
        let parsed = try ByteSizeArgument.parse(text)
        Issue.record("\(text) was accepted as \(parsed)")
      } catch {
        let message = "\(error)"
        #expect(message.contains(reason), "\(text): \(message)")
        #expect(message.hasPrefix("'\(text)' is not a size"), "\(text): \(message)")
      }
    }
  }
}
