import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The real `cache-fsck` binary against the committed fixture trees (`Fixtures/caches`), against a tree being
/// written and read by other processes, and against SIGINT and bad invocations.
@Suite(.serialized)
struct FsckTests {
  // MARK: Fixtures

  @Test func everyFaultHasAFixtureAndAREADMELine() throws {
    let readme = try String(contentsOfFile: "\(cacheFixturesDirectory)/README.md", encoding: .utf8)
    let listed = readme.split(separator: "\n").filter { $0.hasPrefix("- `") }.map {
      String($0.dropFirst(3).prefix { $0 != "`" })
    }
    #expect(listed.sorted() == cacheFixtureNames, "README.md must have exactly one line per case")
    let required = [
      "clean", "flipped-chunk-byte", "truncated-data", "truncated-manifest", "wrong-magic", "future-version",
      "bad-manifest-crc", "orphan-data", "orphan-manifest", "misplaced-object", "hash-path-mismatch",
      "stale-tmp", "unknown-file", "missing-format", "pinned-partial", "several-faults",
    ]
    for name in required { #expect(cacheFixtureNames.contains(name), "no fixture \(name)") }
    for name in cacheFixtureNames {
      let expected = try FixtureExpectation(fixture: name)
      #expect(expected.name == name)
      #expect(expected.recheck.exitCode == 0, "\(name): a re-check after repair must be clean")
    }
  }

  @Test("check, repair, re-check: exact findings and exit codes", arguments: cacheFixtureNames)
  func fixture(_ name: String) async throws {
    let expected = try FixtureExpectation(fixture: name)
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try copyFixture(name, to: cache, agingNamesContaining: expected.agedNameMarker)

    let copied = try snapshot(cache)
    let check = try await fsckJSON([cache])
    compare(check, expected.check, "\(name) check")
    let before = try snapshot(cache)
    #expect(before == copied, "\(name): a check (without -n) changed the tree")
    let repair = try await fsckJSON([cache, "--repair"])
    compare(repair, expected.repair, "\(name) repair")
    let after = try snapshot(cache)
    for path in expected.untouchedByRepair {
      #expect(after[path] != nil && after[path] == before[path], "\(name): repair changed \(path)")
    }

    let recheck = try await fsckJSON([cache])
    compare(recheck, expected.recheck, "\(name) re-check after repair")
    #expect(recheck.status == 0, "\(name): re-check after repair is not clean")
  }

  func compare(_ report: FsckReport, _ expected: ExpectedFsckRun, _ label: String) {
    #expect(report.status == expected.exitCode, "\(label): exit status; output: \(report.raw)")
    #expect(report.exitCodeField == expected.exitCode, "\(label): exitCode in the JSON")
    let found = report.findings.sorted()
    let wanted = expected.findings.sorted()
    #expect(
      found == wanted,
      """
      \(label): findings differ
        unexpected: \(found.filter { !wanted.contains($0) }.map(\.description))
        missing:    \(wanted.filter { !found.contains($0) }.map(\.description))
      """)
    if let totals = expected.totals {
      #expect(report.objectTotals == totals, "\(label): totals")
      #expect(report.totals?.busy == 0, "\(label): no object of a fixture is in use")
    }
  }

  @Test("-n leaves the tree byte-identical", arguments: cacheFixtureNames)
  func checkOnlyWritesNothing(_ name: String) async throws {
    let expected = try FixtureExpectation(fixture: name)
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try copyFixture(name, to: cache, agingNamesContaining: expected.agedNameMarker)
    let before = try snapshot(cache)
    for arguments in [["-n", cache], ["--check", cache, "--json"], ["-n", "--fast", cache]] {
      let result = try await fsck(arguments)
      if !arguments.contains("--fast") {  // --fast reads no chunk data, so it may find less
        #expect(
          result.status == expected.check.exitCode, "\(name) \(arguments): \(result.text) \(result.stderr)")
      }
      let after = try snapshot(cache)
      for (path, entry) in before where after[path] != entry {
        Issue.record("\(name) \(arguments): \(path) changed: \(entry) -> \(after[path] ?? "removed")")
      }
      for path in after.keys where before[path] == nil {
        Issue.record("\(name) \(arguments): \(path) appeared")
      }
    }
  }

  /// The committed trees are what the generator writes today (so a format change cannot leave them stale).
  @Test(
    .enabled(
      if: FileManager.default.isExecutableFile(atPath: binary("mediacache-fixtures")),
      "mediacache-fixtures was not built"))
  func fixturesMatchTheirGenerator() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let generated = try await run(binary("mediacache-fixtures"), [dir.file("caches")])
    #expect(generated.status == 0, "\(generated.stderr)")
    let fresh = try allFiles(under: dir.file("caches"))
    let committed = try allFiles(under: cacheFixturesDirectory)
    #expect(fresh == committed, "run tools/make-fixtures: the set of files differs")
    for path in fresh where committed.contains(path) {
      let new = try Data(contentsOf: URL(fileURLWithPath: dir.file("caches/\(path)")))
      let old = try Data(contentsOf: URL(fileURLWithPath: "\(cacheFixturesDirectory)/\(path)"))
      #expect(new == old, "run tools/make-fixtures: \(path) differs")
    }
  }

  // MARK: Exit status

  @Test func operationalErrorsExit8() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }

    let missing = try await fsckJSON([dir.file("no-such-cache")])
    #expect(missing.status == 8, "\(missing.raw)")
    #expect(missing.exitCodeField == 8)
    #expect(try await fsck([dir.file("no-such-cache"), "--repair"]).status == 8)
    #expect(
      !FileManager.default.fileExists(atPath: dir.file("no-such-cache")), "fsck must not create a cache")

    try Data("not a directory".utf8).write(to: URL(fileURLWithPath: dir.file("plain-file")))
    #expect(try await fsck([dir.file("plain-file")]).status == 8)

    // A cache of a future major version: nothing is checked or touched, even with --repair (which would
    // otherwise fix the planted bad chunk).
    let cache = dir.file("future")
    try copyFixture("flipped-chunk-byte", to: cache)
    try Data("mediacache-format 2.0\n".utf8).write(to: URL(fileURLWithPath: "\(cache)/FORMAT"))
    let before = try snapshot(cache)
    for arguments in [[cache], [cache, "--repair"], ["-n", cache]] {
      let result = try await fsck(arguments)
      #expect(result.status == 8, "\(arguments): \(result.text) \(result.stderr)")
      #expect(result.stderr.contains("2.0"), "the error names the version found: \(result.stderr)")
    }
    #expect(try snapshot(cache) == before, "a cache of another major version must not be touched")
  }

  /// A second copy of an object's files under another shard is reported whichever order the directory lists
  /// them in (a copy listed after the object's own replaced it in the checker's view, and was never reported:
  /// disk no tool would ever free), in a full and a fast check, and left alone by a repair.
  @Test(arguments: ["00/00", "0c/00", "ff/ff"]) func aStrayCopyOfAnObjectIsReported(_ shard: String)
    async throws
  {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try copyFixture("clean", to: cache)
    let id = "0cf9cebdfe4ca243aeeb4685abd76ceeddd59aa0450f27b351e97ca2d1e5ff0d"
    try FileManager.default.createDirectory(
      atPath: "\(cache)/objects/\(shard)", withIntermediateDirectories: true)
    for suffix in ["data", "manifest"] {
      try FileManager.default.copyItem(
        atPath: "\(cache)/objects/0c/f9/\(id).\(suffix)", toPath: "\(cache)/objects/\(shard)/\(id).\(suffix)")
    }
    let strays = Set(["data", "manifest"].map { "objects/\(shard)/\(id).\($0)" })
    let before = try snapshot(cache)
    for arguments in [[cache], [cache, "--fast"], [cache, "--repair"]] {
      let report = try await fsckJSON(arguments)
      #expect(report.status == 4, "\(arguments): \(report.raw)")
      let findings = report.output?.report.findings ?? []
      #expect(Set(findings.map(\.path)) == strays, "\(arguments): \(findings)")
      #expect(findings.allSatisfy { $0.kind == .misplacedFile && $0.severity == .error }, "\(arguments)")
      if arguments.contains("--repair") { #expect(findings.allSatisfy { $0.action == .failed }) }
    }
    #expect(try snapshot(cache) == before, "the copies and the object were left as they were")
  }

  @Test func usageErrorsExit16() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    try copyFixture("clean", to: cache)
    let before = try snapshot(cache)
    for arguments in [
      ["-n", "--repair", cache], ["--check", "--repair", cache], [], ["--tmp-grace", "-1", cache],
      ["--no-such-option", cache], [cache, "extra-argument"],
      // Durations no `Duration` can hold trapped (SIGILL) instead of being refused.
      ["--tmp-grace", "nan", cache], ["--tmp-grace", "inf", cache], ["--tmp-grace", "1e30", cache],
    ] {
      let result = try await fsck(arguments)
      #expect(result.status == 16, "\(arguments): \(result.status) \(result.stderr)")
      #expect(!result.stderr.isEmpty, "\(arguments): a usage error says what is wrong")
    }
    #expect(try snapshot(cache) == before)
  }

  @Test func helpExits0() async throws {
    for flag in ["--help", "-h"] {
      let result = try await fsck([flag])
      #expect(result.status == 0, "cache-fsck \(flag): status \(result.status)\n\(result.stderr.prefix(300))")
      #expect(result.text.contains("USAGE"), "cache-fsck \(flag) prints the usage")
    }
  }

  /// SIGINT stops the check after the current object, prints the findings so far and a CANCELLED summary, and
  /// exits with bit 32 set. A tiny tree finishes before the signal lands, so this uses a generated tree of a
  /// few thousand objects, and sends the signal once cache-fsck has read about a third of the data (Linux:
  /// `/proc/PID/io`), so the cancel lands mid-way; a bigger tree is tried if the check still won the race.
  @Test(.timeLimit(.minutes(5)))
  func sigintCancelsWithStatus32() async throws {
    var sawCancel = false
    for count in [2000, 8000] where !sawCancel {
      let dir = try TemporaryDirectory()
      defer {
        removeTree(dir.path)
        dir.cleanup()
      }
      let cache = dir.file("cache")
      let tree = try makeLargeTree(at: cache, objects: count)
      let child = try ChildProcess(binary("cache-fsck"), [cache])
      let deadline = Date().addingTimeInterval(10)
      // Not before the handler is installed (the default action would kill it), and not before it has
      // checked some objects.
      while child.process.isRunning && Date() < deadline
        && !(hasSignalHandler(child.pid, SIGINT) && (bytesRead(by: child.pid) ?? .max) > count * 4096 / 3)
      {
        try await Task.sleep(for: .microseconds(200))
      }
      child.kill(SIGINT)
      let result = await child.wait(timeout: 30)
      #expect(child.process.terminationReason == .exit, "cache-fsck died of the signal: \(result.stderr)")
      let lines = result.text.split(separator: "\n")
      let summary = String(lines.last ?? "")
      let reported = Set(
        lines.filter { $0.contains("fails its CRC") }.compactMap { line in
          ObjectID(hex: (line.split(separator: ":").first ?? "").split(separator: "/").last?.prefix(64) ?? "")
        })
      if result.status & 32 == 0 {
        // Finished first: a complete, uncancelled check of every object.
        #expect(result.status == 4, "\(summary)")
        #expect(!summary.contains("CANCELLED"))
        #expect(reported == tree.corrupt)
        continue
      }
      sawCancel = true
      #expect(summary.contains("CANCELLED"), "summary: \(summary)")
      // What was printed is exactly what was found so far: the corrupt objects among the first N checked (the
      // check goes in id order).
      let checked = try #require(
        Int(summary.split(separator: ": ").dropFirst(2).first?.split(separator: " ").first ?? ""),
        "summary: \(summary)")
      #expect(checked < count, "a cancelled check did not check everything: \(summary)")
      let reached = Set(tree.ids.sorted().prefix(checked)).intersection(tree.corrupt)
      #expect(reported == reached, "findings printed before the cancel")
      #expect(result.status == 32 | (reached.isEmpty ? 0 : 4), "status \(result.status): \(summary)")
    }
    #expect(sawCancel, "cache-fsck always finished before SIGINT")
  }

  // MARK: Live processes

  /// Writers (slow) and readers work on a cache while `cache-fsck` checks and repairs it again and again: no
  /// false corruption for chunks being written, busy objects skipped, nothing changed, and the other processes
  /// finish with the right bytes.
  @Test(.timeLimit(.minutes(5)))
  func fsckWhileOtherProcessesWriteAndRead() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.cleanup() }
    let cache = dir.file("cache")
    let helper = binary("mediacache-testhelper")
    let chunkSize = 65536
    func source(_ name: String, _ count: Int, seed: UInt64) throws -> String {
      let path = dir.file(name)
      try randomBytes(count: count, seed: seed).write(to: URL(fileURLWithPath: path))
      return path
    }

    // Two complete objects for the readers, written before anything else starts.
    var readKeys: [(key: String, source: String)] = []
    for index in 0..<2 {
      let key = "https://live.example/read-\(index).mp4"
      let path = try source("read-\(index).bin", 700_000 + index * 12345, seed: UInt64(100 + index))
      let written = try await run(helper, ["write", cache, key, path, "--chunk-size", "\(chunkSize)"])
      #expect(written.status == 0, "\(written.stderr)")
      readKeys.append((key, path))
    }

    // Three slow writers, each taking about 3 s: 1 MiB in 16 KiB pieces, 45 ms apart, committing every chunk.
    var writeKeys: [(key: String, source: String)] = []
    var writers: [ChildProcess] = []
    for index in 0..<3 {
      let key = "https://live.example/write-\(index).mp4"
      let path = try source("write-\(index).bin", (1 << 20) - index * 1000, seed: UInt64(200 + index))
      writeKeys.append((key, path))
      writers.append(
        try ChildProcess(
          helper,
          [
            "write", cache, key, path, "--chunk-size", "\(chunkSize)", "--piece", "16384", "--delay-ms", "45",
            "--commit-bytes", "\(chunkSize)",
          ]))
    }
    for writer in writers {
      #expect(
        await writer.waitForLine(timeout: 30) { $0 == "opened" }, "writer output: \(writer.outputSoFar)")
    }
    // Readers of the complete objects, and one of an object still being written (misses until it is done).
    var readers: [ChildProcess] = []
    for (key, path) in readKeys + [writeKeys[0]] {
      readers.append(try ChildProcess(helper, ["read", cache, key, path, "--seconds", "3"]))
    }

    let watched = Dictionary(
      uniqueKeysWithValues: (readKeys + writeKeys).map { (CacheKey($0.key).objectID.hex, $0.key) })
    var runs = 0
    var busySeen = 0
    let deadline = Date().addingTimeInterval(60)
    while (writers.contains(where: { $0.process.isRunning }) || runs < 6) && Date() < deadline {
      for arguments in [[cache], [cache, "--fast"], [cache, "--repair"]] {
        let report = try await fsckJSON(arguments)
        runs += 1
        busySeen = max(busySeen, report.totals?.busy ?? 0)
        #expect(report.status == 0, "\(arguments): \(report.raw)")
        for finding in report.findings {
          let object = watched.first { finding.path.contains($0.key) }?.value ?? "another file"
          Issue.record(
            "\(arguments) reported \(finding) (\(object)) while other processes work: \(report.raw)")
          if [.chunkChecksum, .shortData, .orphanData, .missingData].contains(finding.kind) {
            Issue.record("false corruption reported for \(object)")
          }
          #expect(finding.action == .none, "--repair changed \(object)")
        }
      }
    }
    #expect(busySeen > 0, "no fsck run saw a busy object in \(runs) runs")

    for writer in writers {
      let result = await writer.wait(timeout: 60)
      #expect(result.status == 0, "writer: \(result.stderr)")
      #expect(result.text.hasSuffix("done\n"), "writer output ends: \(result.text.suffix(40))")
    }
    for (index, reader) in readers.enumerated() {
      let result = await reader.wait(timeout: 60)
      #expect(result.status == 0, "reader \(index) (3 = wrong byte): \(result.text) \(result.stderr)")
      #expect(result.text.hasPrefix("reads="), "\(result.text)")
      if index < readKeys.count {
        #expect(!result.text.hasPrefix("reads=0 "), "reader \(index) of a complete object read nothing")
      }
    }

    // Every object is complete with its source's bytes, and a final check (and repair) finds nothing.
    let store = try ShardedStore(root: cache, chunkSize: chunkSize, create: false)
    for (key, path) in readKeys + writeKeys {
      let manager = try FileHandleAssetDataManager(store: store, id: CacheKey(key).objectID, writable: false)
      defer { try? manager.close() }
      #expect(manager.manifest.isComplete, "\(key)")
      #expect(
        try manager.read(0..<manager.manifest.contentLength!) == Data(contentsOf: URL(fileURLWithPath: path)))
    }
    for arguments in [[cache], [cache, "--repair"]] {
      let final = try await fsckJSON(arguments)
      #expect(final.status == 0 && final.findings.isEmpty, "\(final.raw)")
      #expect(final.objectTotals == FsckTotals(objects: 5, complete: 5, partial: 0, pinned: 0))
      #expect(final.totals?.busy == 0)
    }
  }
}
