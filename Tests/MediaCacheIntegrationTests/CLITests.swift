import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

@testable import mediacache

/// The built `mediacache` binary run as a user would, against temporary cache directories.
@Suite struct CLITests {
  let mediacache = binary("mediacache")

  /// What `status --json` prints for `key`.
  func status(_ cache: String, _ key: String) async throws -> MediaCache.Status {
    try await decodeReport(
      MediaCache.Status.self, try run(mediacache, ["status", "--cache", cache, key, "--json"]))
  }

  /// What `inspect --json` prints for `key`.
  func inspect(_ cache: String, _ key: String) async throws -> ObjectDescription {
    try await decodeReport(
      ObjectDescription.self, try run(mediacache, ["inspect", "--cache", cache, key, "--json"]))
  }

  @Test func importStatusCatRoundTrip() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let source = randomBytes(count: 2_500_000, seed: 3)
    try source.write(to: URL(fileURLWithPath: dir.file("video.mp4")))

    let imported = try await run(
      mediacache,
      ["import", "--cache", cache, "https://cdn/v.mp4", dir.file("video.mp4"), "--content-type", "video/mp4"])
    #expect(imported.status == 0, "\(imported.stderr)")
    #expect(imported.text.contains("complete 2500000 bytes"))

    let status = try await run(mediacache, ["status", "--cache", cache, "https://cdn/v.mp4", "--json"])
    #expect(status.status == 0)
    #expect(try decodeReport(MediaCache.Status.self, status) == .complete(length: 2_500_000))
    #expect(
      status.text == #"{"cachedBytes":2500000,"length":2500000,"ranges":[[0,2500000]],"state":"complete"}"#
        + "\n")

    let whole = try await run(mediacache, ["cat", "--cache", cache, "https://cdn/v.mp4"])
    #expect(whole.status == 0)
    #expect(whole.stdout == source)

    let part = try await run(
      mediacache, ["cat", "--cache", cache, "https://cdn/v.mp4", "--range", "1048000-1049999"])
    #expect(part.status == 0)
    #expect(part.stdout == source[1_048_000...1_049_999])

    let tail = try await run(
      mediacache, ["cat", "--cache", cache, "https://cdn/v.mp4", "--range", "2499990-"])
    #expect(tail.stdout == source[2_499_990...])

    let inspect = try await run(mediacache, ["inspect", "--cache", cache, "https://cdn/v.mp4", "--json"])
    let fields = try decodeReport(ObjectDescription.self, inspect)
    #expect(fields.objectID == CacheKey("https://cdn/v.mp4").objectID)
    #expect(fields.state == "complete")
    #expect(fields.contentType == "video/mp4")
    #expect(fields.contentLength == 2_500_000 && fields.cachedBytes == 2_500_000)
    #expect(fields.chunkSize == 1 << 20)
    #expect(fields.chunkCount == 3)
    #expect(fields.presentChunks == 3)
    #expect(fields.presentChunkRuns == [0..<3])
    #expect(fields.pinned == false)
    #expect(fields.etag == nil && fields.lastModified == nil)
    #expect(abs(fields.createdAt.timeIntervalSinceNow) < 600)
    let store = try ShardedStore(root: cache)
    #expect(fields.dataPath == store.paths(for: fields.objectID).data)
    #expect(fields.diskBytes == (try store.diskUsage(fields.objectID)))
    // Unknown values are null, not left out; the human listing shows the same values in the same order.
    #expect(inspect.text.contains(#""etag":null"#) && inspect.text.contains(#""lastModified":null"#))
    let human = try await run(mediacache, ["inspect", "--cache", cache, "https://cdn/v.mp4"])
    #expect(
      human.text.hasPrefix("objectID: \"\(fields.objectID.hex)\"\nstate: \"complete\"\n"), "\(human.text)")
    #expect(human.text.contains("\npresentChunkRuns: [[0,3]]\n") && human.text.contains("\netag: null\n"))
  }

  @Test func partialImportAndMissingBytes() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let source = randomBytes(count: 5 * 65536 + 100, seed: 4)
    try source.write(to: URL(fileURLWithPath: dir.file("src")))
    let common = ["--cache", cache, "k", dir.file("src"), "--chunk-size", "65536"]
    // Bytes 65536..<196608 are exactly chunks 1 and 2; 65000..<65536 is a span of chunk 0.
    let imported = try await run(
      mediacache, ["import"] + common + ["--range", "65000-196607", "--length", "\(source.count)"])
    #expect(imported.status == 0, "\(imported.stderr)")

    #expect(
      try await status(cache, "k")
        == .partial(cachedBytes: 131_608, length: Int64(source.count), ranges: [65000..<196_608]))

    let inside = try await run(mediacache, ["cat", "--cache", cache, "k", "--range", "65000-70009"])
    #expect(inside.stdout == source[65000...70009])

    // One byte outside the cached ranges: nothing is written, exit 2, one line naming what is missing.
    let missing = try await run(mediacache, ["cat", "--cache", cache, "k", "--range", "64999-70000"])
    #expect(missing.status == 2)
    #expect(missing.stdout.isEmpty)
    #expect(missing.stderr.hasSuffix("missing bytes 64999-64999\n"))
    #expect(missing.stderr.split(separator: "\n").count == 1)

    // The last (short) chunk completes once it is imported, because the length is known.
    let last = try await run(
      mediacache, ["import"] + common + ["--range", "327680-", "--length", "\(source.count)"])
    #expect(last.status == 0, "\(last.stderr)")
    #expect(try await status(cache, "k").ranges == [65000..<196_608, 327_680..<Int64(source.count)])

    let conflicting = try await run(mediacache, ["import"] + common + ["--range", "0-99", "--length", "999"])
    #expect(conflicting.status == 1)
    #expect(conflicting.stderr.contains("has length \(source.count)"))

    let none = try await run(mediacache, ["cat", "--cache", cache, "never-stored"])
    #expect(none.status == 2)
    #expect(none.stdout.isEmpty)
    let noStatus = try await run(mediacache, ["status", "--cache", cache, "never-stored", "--json"])
    #expect(try decodeReport(MediaCache.Status.self, noStatus) == MediaCache.Status.none)
    #expect(noStatus.text == #"{"cachedBytes":0,"length":null,"ranges":[],"state":"none"}"# + "\n")
  }

  @Test func listPinRemoveClear() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try randomBytes(count: 10_000, seed: 5).write(to: URL(fileURLWithPath: dir.file("a")))
    for key in ["one", "two"] {
      #expect(try await run(mediacache, ["import", "--cache", cache, key, dir.file("a")]).status == 0)
    }
    #expect(try await run(mediacache, ["pin", "--cache", cache, "one"]).status == 0)
    let listed = try await decodeReport(
      [ListEntry].self, try run(mediacache, ["ls", "--cache", cache, "--json"]))
    #expect(listed.count == 2)
    let one = try #require(listed.first { $0.objectID == CacheKey("one").objectID })
    #expect(one.pinned == true)
    #expect(one.state == "complete")
    #expect(one.cachedBytes == 10_000 && one.length == 10_000 && one.error == nil)
    #expect((one.diskBytes ?? 0) >= 10_000)
    #expect(listed.first { $0.objectID == CacheKey("two").objectID }?.pinned == false)
    #expect(try await run(mediacache, ["unpin", "--cache", cache, "one"]).status == 0)
    #expect(try await inspect(cache, "one").pinned == false)

    let removed = try await run(mediacache, ["rm", "--cache", cache, "two"])
    #expect(removed.status == 0)
    #expect(removed.text.contains("freed"))
    let again = try await run(mediacache, ["rm", "--cache", cache, "two"])
    #expect(again.status == 2)
    #expect(again.stderr.contains("not cached"))
    #expect(try await run(mediacache, ["pin", "--cache", cache, "two"]).status == 2)

    let clear = try await run(mediacache, ["clear", "--cache", cache])
    #expect(clear.status == 0)
    let freed = clear.text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    #expect(freed >= 10_000)
    #expect(try await run(mediacache, ["ls", "--cache", cache, "--json"]).text == "[]\n")
  }

  @Test func badInputIsOneLineAndChangesNothing() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    // A directory that is not a cache: refused, nothing created in it.
    let foreign = dir.file("foreign")
    try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: true)
    try Data("hello".utf8).write(to: URL(fileURLWithPath: "\(foreign)/notes.txt"))
    let refused = try await run(mediacache, ["status", "--cache", foreign, "k"])
    #expect(refused.status == 4)
    #expect(refused.stderr.contains("not a MediaCache directory"))
    #expect(try FileManager.default.contentsOfDirectory(atPath: foreign) == ["notes.txt"])

    // A cache of a future major version: refused.
    let future = dir.file("future")
    try FileManager.default.createDirectory(atPath: future, withIntermediateDirectories: true)
    try Data("mediacache-format 2.0\n".utf8).write(to: URL(fileURLWithPath: "\(future)/FORMAT"))
    let newer = try await run(mediacache, ["ls", "--cache", future])
    #expect(newer.status == 4)
    #expect(newer.stderr.contains("mediacache-format 2.0"))

    // Usage errors: a malformed range, a missing argument.
    let cache = dir.file("cache")
    #expect(try await run(mediacache, ["cat", "--cache", cache, "k", "--range", "9-3"]).status == 64)
    #expect(try await run(mediacache, ["import", "--cache", cache, "k"]).status == 64)

    // A missing source file: one line, exit 1, no object appears.
    let noFile = try await run(mediacache, ["import", "--cache", cache, "k", dir.file("absent")])
    #expect(noFile.status == 1)
    #expect(noFile.stderr.split(separator: "\n").count == 1)
    #expect(try await run(mediacache, ["status", "--cache", cache, "k"]).text == "none\n")

    // A range outside the file.
    try randomBytes(count: 100, seed: 6).write(to: URL(fileURLWithPath: dir.file("small")))
    let outside = try await run(
      mediacache, ["import", "--cache", cache, "k", dir.file("small"), "--range", "50-500"])
    #expect(outside.status == 1)
    #expect(outside.stderr.contains("outside"))
  }

  @Test func lookingAtAMissingCacheCreatesNothing() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let absent = dir.file("absent")
    #expect(try await run(mediacache, ["ls", "--cache", absent, "--json"]).text == "[]\n")
    #expect(try await run(mediacache, ["status", "--cache", absent, "k"]).text == "none\n")
    let cat = try await run(mediacache, ["cat", "--cache", absent, "k"])
    #expect(cat.status == 2)
    #expect(cat.stdout.isEmpty)
    #expect(try await run(mediacache, ["rm", "--cache", absent, "k"]).status == 2)
    #expect(try await run(mediacache, ["clear", "--cache", absent]).text == "freed 0 bytes (0 objects)\n")
    #expect(!FileManager.default.fileExists(atPath: absent))
  }

  @Test func defaultDirectoryComesFromTheEnvironment() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    try randomBytes(count: 1000, seed: 8).write(to: URL(fileURLWithPath: dir.file("f")))
    var environment = ProcessInfo.processInfo.environment
    environment["MEDIACACHE_DIR"] = nil
    environment["XDG_CACHE_HOME"] = dir.file("xdg")
    let imported = try await run(mediacache, ["import", "k", dir.file("f")], environment: environment)
    #expect(imported.status == 0, "\(imported.stderr)")
    #expect(FileManager.default.fileExists(atPath: dir.file("xdg/mediacache/FORMAT")))
    environment["MEDIACACHE_DIR"] = dir.file("explicit")
    #expect(try await run(mediacache, ["import", "k", dir.file("f")], environment: environment).status == 0)
    #expect(FileManager.default.fileExists(atPath: dir.file("explicit/FORMAT")))
  }
}
