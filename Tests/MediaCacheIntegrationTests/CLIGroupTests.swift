import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

/// `import|fetch --group`, `ls --group` and `rm --group` through the built binary.
@Suite struct CLIGroupTests {
  let mediacache = binary("mediacache")

  func list(_ cache: String, _ extra: [String] = []) async throws -> [[String: Any]] {
    let listed = try await run(mediacache, ["ls", "--cache", cache, "--json"] + extra)
    #expect(listed.status == 0, "\(listed.stderr)")
    return try #require(JSONSerialization.jsonObject(with: listed.stdout) as? [[String: Any]])
  }

  @Test func importListAndRemoveAGroup() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try randomBytes(count: 70_000, seed: 3).write(to: URL(fileURLWithPath: dir.file("src")))
    let keys = ["movie-1/preview", "movie-1/thumbnail", "movie-1/video", "movie-2/video"]
    for key in keys {
      let group = String(key.prefix { $0 != "/" })
      let imported = try await run(
        mediacache, ["import", "--cache", cache, key, dir.file("src"), "--group", group])
      #expect(imported.status == 0, "\(imported.stderr)")
    }
    #expect(try await run(mediacache, ["import", "--cache", cache, "loose", dir.file("src")]).status == 0)
    #expect(try await run(mediacache, ["pin", "--cache", cache, "movie-1/video"]).status == 0)

    let members = try await list(cache, ["--group", "movie-1"])
    #expect(
      Set(members.compactMap { $0["objectID"] as? String })
        == Set(keys.prefix(3).map { CacheKey($0).objectID.hex }))
    #expect(members.allSatisfy { $0["group"] as? String == "movie-1" })
    let all = try await list(cache)
    #expect(all.count == 5)
    #expect(all.filter { $0["group"] is NSNull }.count == 1)
    let text = try await run(mediacache, ["ls", "--cache", cache, "--group", "movie-2"])
    #expect(
      text.text.contains("group=movie-2") && text.text.split(separator: "\n").count == 1, "\(text.text)")

    // Bad input: a usage error that changes nothing.
    let long = try await run(
      mediacache, ["rm", "--cache", cache, "--group", String(repeating: "g", count: 256)])
    #expect(
      long.status == 64 && long.stderr.contains("group is 256 bytes; the limit is 255"), "\(long.stderr)")
    let control = try await run(
      mediacache, ["import", "--cache", cache, "x", dir.file("src"), "--group", "a\u{1}b"])
    #expect(control.status == 64 && control.stderr.contains("control character"), "\(control.stderr)")
    #expect(try await run(mediacache, ["rm", "--cache", cache, "loose", "--group", "movie-1"]).status == 64)
    #expect(try await run(mediacache, ["rm", "--cache", cache]).status == 64)
    #expect(try await list(cache).count == 5)

    let removed = try await run(mediacache, ["rm", "--cache", cache, "--group", "movie-1"])
    #expect(removed.status == 0, "\(removed.stderr)")
    #expect(removed.text.hasPrefix("removed 3 objects of group 'movie-1', freed "), "\(removed.text)")
    #expect(
      try await list(cache).compactMap { $0["objectID"] as? String }.sorted()
        == [CacheKey("movie-2/video").objectID.hex, CacheKey("loose").objectID.hex].sorted())
    #expect(try await list(cache, ["--group", "movie-1"]).isEmpty)
    #expect(try await run(mediacache, ["rm", "--cache", cache, "--group", "movie-1"]).status == 2)
    let fsck = try await run(binary("cache-fsck"), [cache])
    #expect(fsck.status == 0, "\(fsck.text)\(fsck.stderr)")
  }

  @Test func fetchPutsEveryFileOfAnHLSSetInTheGroup() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try await withFileOrigin { origin in
      let master = origin.url(file: "hls/master.m3u8")
      let fetched = try await run(
        mediacache, ["fetch", "--hls", "--cache", cache, master, "--group", "show-9"])
      #expect(fetched.status == 0, "\(fetched.stderr)")
      let single = origin.url(file: "hls/v1/key.bin")
      #expect(try await run(mediacache, ["fetch", "--cache", cache, single, "--group", "other"]).status == 0)
      let members = try await list(cache, ["--group", "show-9"])
      // The master and media playlists and the four segments of variant 0.
      #expect(members.count == 6, "\(members)")
      #expect(
        members.contains { $0["objectID"] as? String == CacheKey(master).objectID.hex })
      #expect(try await list(cache, ["--group", "other"]).count == 1)
      let removed = try await run(mediacache, ["rm", "--cache", cache, "--group", "show-9"])
      #expect(removed.status == 0 && removed.text.hasPrefix("removed 6 objects"), "\(removed.text)")
      #expect(try await list(cache).count == 1)
    }
  }
}
