import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

@testable import cache_compactor
@testable import cache_fsck
@testable import mediacache

/// Every tool's `--json` decodes back into the Codable type it was encoded from, with the values the run
/// produced, and encoding the decoded value again gives the very bytes printed (one encoder, no second
/// emitter). The compaction report has one key set in `mediacache purge` and `cache-compactor`.
@Suite(.serialized) struct ReportJSONTests {
  let mediacache = binary("mediacache")
  let compactor = binary("cache-compactor")

  /// Writes `count` complete objects `obj-0…` of `size` bytes (4 KiB chunks), least recently used first.
  func makeTree(_ cache: String, count: Int, size: Int) throws -> ShardedStore {
    let store = try ShardedStore(root: cache, chunkSize: 4096, durability: .relaxed)
    let start = Date().addingTimeInterval(-86400)
    for index in 0..<count {
      let id = CacheKey("obj-\(index)").objectID
      let manager = try FileHandleAssetDataManager(store: store, id: id)
      try manager.setContentLength(Int64(size))
      try manager.write(randomBytes(count: size, seed: UInt64(index + 1)), at: 0)
      try manager.close()
      try FileManager.default.setAttributes(
        [.modificationDate: start.addingTimeInterval(Double(index) * 60)],
        ofItemAtPath: store.paths(for: id).manifest)
    }
    return store
  }

  /// `value` encoded again by the reports' encoder, as a line.
  func reencoded(_ value: some Encodable) throws -> String { try ReportJSON.encode(value) + "\n" }

  @Test func purgeAndCompactorPrintTheSameCompactionKeys() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let (first, second) = (dir.file("purged"), dir.file("compacted"))
    let store = try makeTree(first, count: 4, size: 20_000)
    _ = try makeTree(second, count: 4, size: 20_000)
    let perObject = try store.diskUsage(CacheKey("obj-0").objectID)
    // Room for 2.5 objects: purge goes down to the limit, the compactor to 90% of it; both keep two.
    let limit = "\(perObject * 5 / 2)"

    let purge = try await run(mediacache, ["purge", "--cache", first, "--max-size", limit, "--json"])
    #expect(purge.status == 0, "\(purge.stderr)")
    let pass = try await run(compactor, [second, "--max-size", limit, "--max-age", "90d", "--json"])
    #expect(pass.status == 0, "\(pass.stderr)")

    let purgeKeys = try decodeReport(JSONKeys.self, purge).keys
    let passKeys = try decodeReport(JSONKeys.self, pass).keys
    #expect(
      passKeys == purgeKeys.union(["pass", "namespace"]),
      "purge only: \(purgeKeys.subtracting(passKeys)); compactor only: \(passKeys.subtracting(purgeKeys))")
    #expect(purgeKeys.contains("evictedCount") && purgeKeys.contains("duration"))
    #expect(purgeKeys.isDisjoint(with: ["objectsRemoved", "evictedTotal", "durationSeconds"]))

    // Both decode into CompactionReport with what the pass did: the two least recently used objects went.
    let purged = try decodeReport(CompactionReport.self, purge)
    let compacted = try decodeReport(PassReport.self, pass)
    #expect(compacted.pass == 1)
    for report in [purged, compacted.report] {
      #expect(report.objectsScanned == 4)
      #expect(report.evictedCount == 2 && report.evicted == [.size: 2])
      #expect(report.removed.map(\.id) == [CacheKey("obj-0").objectID, CacheKey("obj-1").objectID])
      #expect(report.bytesFreed == perObject * 2 && report.bytesBefore == perObject * 4)
      #expect(report.bytesAfter == perObject * 2)
      #expect(report.duration > .zero && report.duration < .seconds(60))
      #expect(!report.dryRun && !report.incomplete && report.errors.isEmpty && report.pinnedKept == 0)
    }
    // Every reason is listed, 0 when none was evicted for it.
    #expect(purge.text.contains(#""evicted":{"age":0,"corrupt":0,"manual":0,"size":2}"#), "\(purge.text)")
    #expect(try reencoded(purged) == purge.text)
    #expect(try reencoded(compacted) == pass.text)
  }

  @Test func fsckReportRoundTrips() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let expected = try FixtureExpectation(fixture: "flipped-chunk-byte")
    try copyFixture("flipped-chunk-byte", to: cache, agingNamesContaining: expected.agedNameMarker)

    let check = try await fsck([cache, "--json"])
    #expect(check.status == 4, "\(check.stderr)")
    let checked = try decodeReport(FsckOutput.self, check)
    #expect(checked.root == cache && checked.mode == "check" && !checked.fast && checked.exitCode == 4)
    #expect(checked.report.uncorrected == 1 && checked.report.corrected == 0 && !checked.report.cancelled)
    #expect(checked.report.totals.objects == 2 && checked.report.totals.complete == 2)
    #expect(checked.report.totals.chunksVerified > 0 && checked.report.totals.bytesVerified > 0)
    let finding = try #require(checked.report.findings.first)
    #expect(checked.report.findings.count == 1)
    #expect(finding.kind == .chunkChecksum && finding.severity == .error && finding.chunk == 1)
    #expect(finding.action == .none && !finding.message.isEmpty)
    #expect(checked.report.findings.map(\.identity) == expected.check.findings)
    #expect(try reencoded(checked) == check.text)
    // The derived counts are printed as well.
    #expect(check.text.contains(#""corrected":0"#) && check.text.contains(#""uncorrected":1"#))

    let repair = try await fsck([cache, "--repair", "--fast", "--json"])
    let repaired = try decodeReport(FsckOutput.self, repair)
    #expect(repaired.mode == "repair" && repaired.fast)
    #expect(repaired.exitCode == repair.status)
    #expect(try reencoded(repaired) == repair.text)

    let missing = try await fsck([dir.file("absent"), "--json"])
    #expect(missing.status == 8)
    let failure = try decodeReport(FsckFailure.self, missing)
    #expect(failure.exitCode == 8 && failure.error.contains(dir.file("absent")), "\(failure.error)")
    #expect(try reencoded(failure) == missing.text)
  }

  @Test func mediacacheReportsRoundTrip() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try randomBytes(count: 10_000, seed: 21).write(to: URL(fileURLWithPath: dir.file("src")))
    let imported = try await run(
      mediacache,
      [
        "import", "--cache", cache, "https://cdn.example/a/b.mp4", dir.file("src"), "--content-type",
        "video/mp4",
      ])
    #expect(imported.status == 0, "\(imported.stderr)")
    let partial = try await run(
      mediacache,
      [
        "import", "--cache", cache, "p", dir.file("src"), "--range", "0-4095", "--length", "10000",
        "--chunk-size", "4096",
      ])
    #expect(partial.status == 0, "\(partial.stderr)")
    // A data file without a manifest, and an object whose manifest is garbage.
    let store = try ShardedStore(root: cache)
    let orphan = CacheKey("orphan").objectID
    let broken = CacheKey("broken").objectID
    for id in [orphan, broken] {
      let paths = store.paths(for: id)
      try FileManager.default.createDirectory(atPath: paths.directory, withIntermediateDirectories: true)
      try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: paths.data))
    }
    try Data("not a manifest".utf8).write(to: URL(fileURLWithPath: store.paths(for: broken).manifest))

    let status = try await run(mediacache, ["status", "--cache", cache, "p", "--json"])
    let decodedStatus = try decodeReport(MediaCache.Status.self, status)
    #expect(decodedStatus == .partial(cachedBytes: 4096, length: 10_000, ranges: [0..<4096]))
    #expect(try reencoded(decodedStatus) == status.text)

    let inspect = try await run(
      mediacache, ["inspect", "--cache", cache, "https://cdn.example/a/b.mp4", "--json"])
    let description = try decodeReport(ObjectDescription.self, inspect)
    #expect(description.objectID == CacheKey("https://cdn.example/a/b.mp4").objectID)
    #expect(description.contentLength == 10_000 && description.contentType == "video/mp4")
    #expect(description.state == "complete" && description.userMetadataBytes == 0)
    #expect(try reencoded(description) == inspect.text)
    // Slashes are not escaped, dates are ISO 8601 in UTC.
    #expect(inspect.text.contains(#""dataPath":"\#(store.paths(for: description.objectID).data)""#))
    #expect(
      inspect.text.range(of: #""createdAt":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ""#, options: .regularExpression)
        != nil)

    let listing = try await run(mediacache, ["ls", "--cache", cache, "--json"])
    let entries = try decodeReport([ListEntry].self, listing)
    #expect(try reencoded(entries) == listing.text)
    #expect(entries.count == 4)
    let byID = Dictionary(uniqueKeysWithValues: entries.map { ($0.objectID, $0) })
    #expect(byID[orphan] == ListEntry(objectID: orphan, state: "none", error: "no manifest"))
    let unreadable = try #require(byID[broken])
    #expect(unreadable.state == "unreadable" && unreadable.error?.isEmpty == false)
    #expect(unreadable.cachedBytes == nil && unreadable.pinned == nil && unreadable.diskBytes == nil)
    let partialEntry = try #require(byID[CacheKey("p").objectID])
    #expect(
      partialEntry.state == "partial" && partialEntry.cachedBytes == 4096 && partialEntry.length == 10_000)
    #expect(partialEntry.pinned == false && partialEntry.error == nil)
    // Every key is present in every entry; null where a value is unknown.
    for line in [#""cachedBytes":null"#, #""diskBytes":null"#, #""error":null"#, #""pinned":null"#] {
      #expect(listing.text.contains(line), "\(line)")
    }

    let stats = try await run(mediacache, ["stats", "--cache", cache, "--json"])
    let statistics = try decodeReport(CacheStatistics.self, stats)
    #expect(statistics.objects == 4 && statistics.complete == 1 && statistics.partial == 1)
    #expect(statistics.unreadable == 2 && statistics.cachedBytes == 10_000 + 4096)
    #expect(try reencoded(statistics) == stats.text)
  }
}
