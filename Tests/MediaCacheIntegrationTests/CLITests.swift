import Foundation
import MediaCache
import Testing

/// The built `mediacache` binary run as a user would, against temporary cache directories.
@Suite struct CLITests {
  let mediacache = binary("mediacache")

  func json(_ result: CommandResult) throws -> Any {
    try JSONSerialization.jsonObject(with: result.stdout, options: [.fragmentsAllowed])
  }

  @Test func importStatusCatRoundTrip() throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let source = randomBytes(2_500_000, seed: 3)
    try source.write(to: URL(fileURLWithPath: dir.file("video.mp4")))

    let imported = try run(
      mediacache,
      ["import", "--cache", cache, "https://cdn/v.mp4", dir.file("video.mp4"), "--content-type", "video/mp4"])
    #expect(imported.status == 0, "\(imported.stderr)")
    #expect(imported.text.contains("complete 2500000 bytes"))

    let status = try run(mediacache, ["status", "--cache", cache, "https://cdn/v.mp4", "--json"])
    #expect(status.status == 0)
    let object = try #require(try json(status) as? [String: Any])
    #expect(object["state"] as? String == "complete")
    #expect(object["cachedBytes"] as? Int == 2_500_000)
    #expect(object["length"] as? Int == 2_500_000)
    #expect(object["ranges"] as? [[Int]] == [[0, 2_500_000]])

    let whole = try run(mediacache, ["cat", "--cache", cache, "https://cdn/v.mp4"])
    #expect(whole.status == 0)
    #expect(whole.stdout == source)

    let part = try run(
      mediacache, ["cat", "--cache", cache, "https://cdn/v.mp4", "--range", "1048000-1049999"])
    #expect(part.status == 0)
    #expect(part.stdout == source[1_048_000...1_049_999])

    let tail = try run(mediacache, ["cat", "--cache", cache, "https://cdn/v.mp4", "--range", "2499990-"])
    #expect(tail.stdout == source[2_499_990...])

    let inspect = try run(mediacache, ["inspect", "--cache", cache, "https://cdn/v.mp4", "--json"])
    let fields = try #require(try json(inspect) as? [String: Any])
    #expect(fields["objectID"] as? String == CacheKey("https://cdn/v.mp4").objectID.hex)
    #expect(fields["contentType"] as? String == "video/mp4")
    #expect(fields["chunkSize"] as? Int == 1 << 20)
    #expect(fields["chunkCount"] as? Int == 3)
    #expect(fields["presentChunks"] as? Int == 3)
    #expect(fields["pinned"] as? Bool == false)
    #expect(fields["etag"] is NSNull)
  }

  @Test func partialImportAndMissingBytes() throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let source = randomBytes(5 * 65536 + 100, seed: 4)
    try source.write(to: URL(fileURLWithPath: dir.file("src")))
    let common = ["--cache", cache, "k", dir.file("src"), "--chunk-size", "65536"]
    // Bytes 65536..<196608 are exactly chunks 1 and 2; the bytes around them stay partial chunks.
    let imported = try run(
      mediacache, ["import"] + common + ["--range", "65000-196607", "--length", "\(source.count)"])
    #expect(imported.status == 0, "\(imported.stderr)")

    let status = try json(try run(mediacache, ["status", "--cache", cache, "k", "--json"])) as? [String: Any]
    #expect(status?["state"] as? String == "partial")
    #expect(status?["cachedBytes"] as? Int == 131_072)
    #expect(status?["length"] as? Int == source.count)
    #expect(status?["ranges"] as? [[Int]] == [[65536, 196_608]])

    let inside = try run(mediacache, ["cat", "--cache", cache, "k", "--range", "70000-70009"])
    #expect(inside.stdout == source[70000...70009])

    // One byte outside the cached ranges: nothing is written, exit 2, one line naming what is missing.
    let missing = try run(mediacache, ["cat", "--cache", cache, "k", "--range", "65535-70000"])
    #expect(missing.status == 2)
    #expect(missing.stdout.isEmpty)
    #expect(missing.stderr.hasSuffix("missing bytes 65535-65535\n"))
    #expect(missing.stderr.split(separator: "\n").count == 1)

    // The last (short) chunk completes once it is imported, because the length is known.
    let last = try run(
      mediacache, ["import"] + common + ["--range", "327680-", "--length", "\(source.count)"])
    #expect(last.status == 0, "\(last.stderr)")
    let after = try json(try run(mediacache, ["status", "--cache", cache, "k", "--json"])) as? [String: Any]
    #expect(after?["ranges"] as? [[Int]] == [[65536, 196_608], [327_680, source.count]])

    let conflicting = try run(mediacache, ["import"] + common + ["--range", "0-99", "--length", "999"])
    #expect(conflicting.status == 1)
    #expect(conflicting.stderr.contains("has length \(source.count)"))

    let none = try run(mediacache, ["cat", "--cache", cache, "never-stored"])
    #expect(none.status == 2)
    #expect(none.stdout.isEmpty)
    let noStatus =
      try json(try run(mediacache, ["status", "--cache", cache, "never-stored", "--json"])) as? [String: Any]
    #expect(noStatus?["state"] as? String == "none")
    #expect(noStatus?["length"] is NSNull)
  }

  @Test func listPinRemoveClear() throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try randomBytes(10_000, seed: 5).write(to: URL(fileURLWithPath: dir.file("a")))
    for key in ["one", "two"] {
      #expect(try run(mediacache, ["import", "--cache", cache, key, dir.file("a")]).status == 0)
    }
    #expect(try run(mediacache, ["pin", "--cache", cache, "one"]).status == 0)
    let listed = try #require(
      try json(try run(mediacache, ["ls", "--cache", cache, "--json"])) as? [[String: Any]])
    #expect(listed.count == 2)
    let one = try #require(listed.first { $0["objectID"] as? String == CacheKey("one").objectID.hex })
    #expect(one["pinned"] as? Bool == true)
    #expect(one["state"] as? String == "complete")
    #expect((one["diskBytes"] as? Int ?? 0) >= 10_000)
    #expect(try run(mediacache, ["unpin", "--cache", cache, "one"]).status == 0)
    let inspect =
      try json(try run(mediacache, ["inspect", "--cache", cache, "one", "--json"])) as? [String: Any]
    #expect(inspect?["pinned"] as? Bool == false)

    let removed = try run(mediacache, ["rm", "--cache", cache, "two"])
    #expect(removed.status == 0)
    #expect(removed.text.contains("freed"))
    let again = try run(mediacache, ["rm", "--cache", cache, "two"])
    #expect(again.status == 2)
    #expect(again.stderr.contains("not cached"))
    #expect(try run(mediacache, ["pin", "--cache", cache, "two"]).status == 2)

    let clear = try run(mediacache, ["clear", "--cache", cache])
    #expect(clear.status == 0)
    let freed = clear.text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    #expect(freed >= 10_000)
    #expect(try run(mediacache, ["ls", "--cache", cache, "--json"]).text == "[]\n")
  }

  @Test func badInputIsOneLineAndChangesNothing() throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    // A directory that is not a cache: refused, nothing created in it.
    let foreign = dir.file("foreign")
    try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: true)
    try Data("hello".utf8).write(to: URL(fileURLWithPath: "\(foreign)/notes.txt"))
    let refused = try run(mediacache, ["status", "--cache", foreign, "k"])
    #expect(refused.status == 4)
    #expect(refused.stderr.contains("not a MediaCache directory"))
    #expect(try FileManager.default.contentsOfDirectory(atPath: foreign) == ["notes.txt"])

    // A cache of a future major version: refused.
    let future = dir.file("future")
    try FileManager.default.createDirectory(atPath: future, withIntermediateDirectories: true)
    try Data("mediacache-format 2.0\n".utf8).write(to: URL(fileURLWithPath: "\(future)/FORMAT"))
    let newer = try run(mediacache, ["ls", "--cache", future])
    #expect(newer.status == 4)
    #expect(newer.stderr.contains("mediacache-format 2.0"))

    // Usage errors: a malformed range, a missing argument.
    let cache = dir.file("cache")
    #expect(try run(mediacache, ["cat", "--cache", cache, "k", "--range", "9-3"]).status == 64)
    #expect(try run(mediacache, ["import", "--cache", cache, "k"]).status == 64)

    // A missing source file: one line, exit 1, no object appears.
    let noFile = try run(mediacache, ["import", "--cache", cache, "k", dir.file("absent")])
    #expect(noFile.status == 1)
    #expect(noFile.stderr.split(separator: "\n").count == 1)
    #expect(try run(mediacache, ["status", "--cache", cache, "k"]).text == "none\n")

    // A range outside the file.
    try randomBytes(100, seed: 6).write(to: URL(fileURLWithPath: dir.file("small")))
    let outside = try run(
      mediacache, ["import", "--cache", cache, "k", dir.file("small"), "--range", "50-500"])
    #expect(outside.status == 1)
    #expect(outside.stderr.contains("outside"))
  }

  @Test func lookingAtAMissingCacheCreatesNothing() throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let absent = dir.file("absent")
    #expect(try run(mediacache, ["ls", "--cache", absent, "--json"]).text == "[]\n")
    #expect(try run(mediacache, ["status", "--cache", absent, "k"]).text == "none\n")
    let cat = try run(mediacache, ["cat", "--cache", absent, "k"])
    #expect(cat.status == 2)
    #expect(cat.stdout.isEmpty)
    #expect(try run(mediacache, ["rm", "--cache", absent, "k"]).status == 2)
    #expect(try run(mediacache, ["clear", "--cache", absent]).text == "freed 0 bytes (0 objects)\n")
    #expect(!FileManager.default.fileExists(atPath: absent))
  }

  @Test func defaultDirectoryComesFromTheEnvironment() throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    try randomBytes(1000, seed: 8).write(to: URL(fileURLWithPath: dir.file("f")))
    var environment = ProcessInfo.processInfo.environment
    environment["MEDIACACHE_DIR"] = nil
    environment["XDG_CACHE_HOME"] = dir.file("xdg")
    let imported = try run(mediacache, ["import", "k", dir.file("f")], environment: environment)
    #expect(imported.status == 0, "\(imported.stderr)")
    #expect(FileManager.default.fileExists(atPath: dir.file("xdg/mediacache/FORMAT")))
    environment["MEDIACACHE_DIR"] = dir.file("explicit")
    #expect(try run(mediacache, ["import", "k", dir.file("f")], environment: environment).status == 0)
    #expect(FileManager.default.fileExists(atPath: dir.file("explicit/FORMAT")))
  }
}
