import Foundation
import MediaCache

/// One fixture: a cache tree with one fault (or none), and what a person expects `cache-fsck` to say about it.
///
/// The expectations are written here by hand, per case: they are never obtained by running the checker, so the
/// tests that compare the checker's output with them mean something.
struct FixtureCase {
  let name: String
  /// One line for `Fixtures/caches/README.md`: what the case exercises.
  let exercises: String
  let build: (CaseTree) throws -> Expectations
}

private func key(_ caseName: String, _ name: String) -> String {
  "https://fixtures.example/\(caseName)/\(name).mp4"
}

private let lastModified = "Tue, 14 Nov 2023 22:13:20 GMT"

/// A healthy object (one short chunk) that every fault case carries beside its fault: the
/// checker must not report it and a repair must not touch it.
private func bystander(_ tree: CaseTree, _ caseName: String) throws -> [String] {
  let object = try tree.object(key(caseName, "bystander"), length: 3000, etag: "\"b1\"")
  try tree.put(object)
  return [object.dataPath, object.manifestPath]
}

private func clean(_ exitCode: Int32 = 0, totals: ExpectedTotals? = nil, _ findings: [ExpectedFinding] = [])
  -> ExpectedRun
{
  ExpectedRun(exitCode: exitCode, findings: findings, totals: totals)
}

private func totals(objects: Int, complete: Int, partial: Int = 0, pinned: Int = 0) -> ExpectedTotals {
  ExpectedTotals(objects: objects, complete: complete, partial: partial, pinned: pinned)
}

/// The offset of the first content-type byte in an encoded manifest (FORMAT.md section 3).
private func contentTypeOffset(_ manifest: Manifest) -> Int {
  72 + 8 * manifest.presentChunks.ranges.count + 4 * manifest.chunkCRCs.count + 1
}

/// A case whose one fault is an error a repair fixes: exit 4, then 1, then a clean re-check.
private func singleError(
  _ expected: ExpectedFinding, repairedAt: String? = nil, recheck: ExpectedTotals, untouched: [String]
) -> Expectations {
  Expectations(
    check: clean(4, [expected]), repair: clean(1, [expected.repaired(at: repairedAt)]),
    recheck: clean(0, totals: recheck), untouched: untouched)
}

func allCases() -> [FixtureCase] {
  [
    FixtureCase(
      name: "clean",
      exercises:
        "a healthy cache (complete object with every manifest field set, stored response headers (manifest 1.3) "
        + "among them, partial object whose missing chunk is zeros, empty object, unknown-length object, "
        + "compactor cursor): no findings, exit 0 throughout"
    ) { tree in
      let complete = try tree.object(
        key("clean", "complete"), length: 8400, etag: "\"a1\"", lastModified: lastModified,
        userMetadata: Array("fixture".utf8), versionTag: 0x1234_ABCD,
        storedHeaders: StoredHeaders(
          receivedAt: fixedCreatedAt,
          fields: [
            .init(name: "Cache-Control", value: "public, max-age=86400"),
            .init(name: "Date", value: "Sat, 01 Jun 2024 12:00:00 GMT"),
            .init(name: "Content-Disposition", value: "inline; filename=\"fixture.mp4\""),
            .init(name: "X-Origin-Id", value: "fixture-1"),
          ]))
      let partial = try tree.object(key("clean", "partial"), length: 8400, present: [0, 2])
      let empty = try tree.object(key("clean", "empty"), length: 0, contentType: nil)
      let unknownLength = try tree.object(
        key("clean", "unknown-length"), length: nil, dataLength: 4096, present: [0])
      var files = ["compactor.cursor"]
      for object in [complete, partial, empty, unknownLength] {
        try tree.put(object)
        files += [object.dataPath, object.manifestPath]
      }
      try tree.write("compactor.cursor", "\(complete.id.hex) 1\n")
      return Expectations(
        check: clean(), repair: clean(),
        recheck: clean(totals: totals(objects: 4, complete: 2, partial: 2)), untouched: files)
    },

    FixtureCase(
      name: "flipped-chunk-byte",
      exercises:
        "one bit flipped in chunk 1 of a complete 3-chunk object: chunk-crc on chunk 1; repair drops that chunk "
        + "from the manifest (the data file is not rewritten) and the object becomes partial"
    ) { tree in
      var damaged = try tree.object(key("flipped-chunk-byte", "damaged"), length: 8400)
      damaged.flipDataByte(at: 4096 + 1234)
      try tree.put(damaged)
      let others = try bystander(tree, "flipped-chunk-byte")
      return singleError(
        finding(damaged.dataPath, .chunkChecksum, chunk: 1),
        recheck: totals(objects: 2, complete: 1, partial: 1), untouched: others + [damaged.dataPath])
    },

    FixtureCase(
      name: "truncated-data",
      exercises:
        "data file cut to 5000 of 8400 bytes: short-data from chunk 1 (chunks 1 and 2 reach past the end, "
        + "chunk 0 still verifies); repair drops chunks 1 and 2"
    ) { tree in
      var short = try tree.object(key("truncated-data", "short"), length: 8400)
      short.data = Array(short.data.prefix(5000))
      try tree.put(short)
      let others = try bystander(tree, "truncated-data")
      return singleError(
        finding(short.dataPath, .shortData, chunk: 1),
        recheck: totals(objects: 2, complete: 1, partial: 1), untouched: others + [short.dataPath])
    },

    FixtureCase(
      name: "truncated-manifest",
      exercises:
        "manifest cut to its first 40 bytes (less than the 84-byte minimum): truncated-manifest; repair removes "
        + "the object (manifest and data)"
    ) { tree in
      var cut = try tree.object(key("truncated-manifest", "cut"), length: 8400)
      cut.manifestBytes = Array(cut.manifestBytes.prefix(40))
      try tree.put(cut)
      let others = try bystander(tree, "truncated-manifest")
      return singleError(
        finding(cut.manifestPath, .truncatedManifest), recheck: totals(objects: 1, complete: 1),
        untouched: others)
    },

    FixtureCase(
      name: "wrong-magic",
      exercises:
        "manifest whose first four bytes are zero instead of MCMF: bad-magic; repair removes the object"
    ) { tree in
      var zeroed = try tree.object(key("wrong-magic", "zeroed"), length: 8400)
      zeroed.manifestBytes.replaceSubrange(0..<4, with: [0, 0, 0, 0])
      try tree.put(zeroed)
      let others = try bystander(tree, "wrong-magic")
      return singleError(
        finding(zeroed.manifestPath, .badMagic), recheck: totals(objects: 1, complete: 1), untouched: others
      )
    },

    FixtureCase(
      name: "future-version",
      exercises:
        "manifest of major version 2 (CRC valid): unsupported-version, repair removes the object; beside it a "
        + "manifest of minor version 1.4 with 1.1's (empty) span list, 1.2's (empty) group, 1.3's (empty) stored "
        + "headers and 6 extension bytes appended, which must be read and not reported"
    ) { tree in
      var future = try tree.object(key("future-version", "major-2"), length: 8400)
      future.manifestBytes[4] = 2
      future.resealManifest()
      var newer = try tree.object(key("future-version", "minor-1"), length: 3000)
      newer.manifestBytes =
        Array(newer.manifestBytes.dropLast(4)) + [0, 0, 0, 0] + [0] + [UInt8](repeating: 0, count: 8 + 2)
        + [0xE1, 0xE2, 0xE3, 0xE4, 0xE5, 0xE6]
      newer.manifestBytes[5] = 4
      newer.manifestBytes += [0, 0, 0, 0]
      newer.resealManifest()
      try tree.put(future)
      try tree.put(newer)
      let others = try bystander(tree, "future-version")
      return singleError(
        finding(future.manifestPath, .unsupportedManifestVersion), recheck: totals(objects: 2, complete: 2),
        untouched: others + [newer.dataPath, newer.manifestPath])
    },

    FixtureCase(
      name: "bad-manifest-crc",
      exercises:
        "one byte of a manifest's content type changed, stored CRC left as it was: bad-manifest-crc; repair "
        + "removes the object"
    ) { tree in
      var altered = try tree.object(key("bad-manifest-crc", "altered"), length: 8400)
      altered.manifestBytes[contentTypeOffset(altered.manifest)] ^= 0x20  // "video" -> "Video"
      try tree.put(altered)
      let others = try bystander(tree, "bad-manifest-crc")
      return singleError(
        finding(altered.manifestPath, .manifestChecksum), recheck: totals(objects: 1, complete: 1),
        untouched: others)
    },

    FixtureCase(
      name: "orphan-data",
      exercises:
        "a data file without its manifest (a removal that crashed halfway): orphan-data; repair deletes it"
    ) { tree in
      let orphan = try tree.object(key("orphan-data", "orphan"), length: 8400)
      try tree.put(orphan, manifest: false)
      let others = try bystander(tree, "orphan-data")
      return singleError(
        finding(orphan.dataPath, .orphanData), recheck: totals(objects: 1, complete: 1), untouched: others)
    },

    FixtureCase(
      name: "orphan-manifest",
      exercises: "a manifest without its data file: missing-data; repair deletes the manifest"
    ) { tree in
      let orphan = try tree.object(key("orphan-manifest", "orphan"), length: 8400)
      try tree.put(orphan, data: false)
      let others = try bystander(tree, "orphan-manifest")
      return singleError(
        finding(orphan.manifestPath, .missingData), recheck: totals(objects: 1, complete: 1),
        untouched: others)
    },

    FixtureCase(
      name: "misplaced-object",
      exercises:
        "two healthy objects stored under the wrong shard (one under another valid shard pair, one directly in "
        + "its outer shard): misplaced for each of their four files; repair moves them to their right paths"
    ) { tree in
      var elsewhere = try tree.object(key("misplaced-object", "wrong-shard"), length: 8400)
      let wrong = tree.wrongShard(for: elsewhere.id)
      elsewhere.dataPath = "objects/\(wrong)/\(elsewhere.id.hex).data"
      elsewhere.manifestPath = "objects/\(wrong)/\(elsewhere.id.hex).manifest"
      var shallow = try tree.object(key("misplaced-object", "shallow"), length: 3000)
      shallow.dataPath = "objects/\(shallow.id.shardComponents.0)/\(shallow.id.hex).data"
      shallow.manifestPath = "objects/\(shallow.id.shardComponents.0)/\(shallow.id.hex).manifest"
      try tree.put(elsewhere)
      try tree.put(shallow)
      let others = try bystander(tree, "misplaced-object")
      let found = [
        finding(elsewhere.dataPath, .misplacedFile), finding(elsewhere.manifestPath, .misplacedFile),
        finding(shallow.dataPath, .misplacedFile), finding(shallow.manifestPath, .misplacedFile),
      ]
      return Expectations(
        check: clean(4, found), repair: clean(1, found.map { $0.repaired() }),
        recheck: clean(totals: totals(objects: 3, complete: 3)), untouched: others)
    },

    FixtureCase(
      name: "hash-path-mismatch",
      exercises:
        "a valid manifest of another object (CRC correct) stored under this object's name: hash-path-mismatch; "
        + "repair removes the object"
    ) { tree in
      var host = try tree.object(key("hash-path-mismatch", "host"), length: 8400)
      let stranger = try tree.object(key("hash-path-mismatch", "stranger"), length: 8400)
      host.manifestBytes = stranger.manifestBytes
      try tree.put(host)
      let others = try bystander(tree, "hash-path-mismatch")
      return singleError(
        finding(host.manifestPath, .hashPathMismatch), recheck: totals(objects: 1, complete: 1),
        untouched: others)
    },

    FixtureCase(
      name: "stale-tmp",
      exercises:
        "a staging manifest in tmp/ and a .FORMAT staging file in the root, both aged to 2 h by the tests "
        + "(names contain \"stale\"): stale-tmp for each, repair deletes them; a young tmp/ file is not reported"
    ) { tree in
      let object = try tree.object(key("stale-tmp", "object"), length: 8400)
      try tree.put(object)
      let staleStaging = "tmp/stale.\(object.id.hex).4242.17.manifest"
      let youngStaging = "tmp/\(object.id.hex).4243.18.manifest"
      try tree.write(staleStaging, object.manifestBytes)
      try tree.write(youngStaging, object.manifestBytes)
      try tree.write(".FORMAT.4242.stale", CacheFormat.markerText)
      let others = try bystander(tree, "stale-tmp")
      let found = [
        finding(".FORMAT.4242.stale", .staleTemporaryFile), finding(staleStaging, .staleTemporaryFile),
      ]
      return Expectations(
        check: clean(4, found), repair: clean(1, found.map { $0.repaired() }),
        recheck: clean(totals: totals(objects: 2, complete: 2)),
        untouched: others + [object.dataPath, object.manifestPath, youngStaging])
    },

    FixtureCase(
      name: "unknown-file",
      exercises:
        "files that are not the cache's (root file and directory, file in objects/, bad shard name, unknown "
        + "and upper-case names in a shard, directory in tmp/): warnings only, never deleted, exit 0 throughout"
    ) { tree in
      let object = try tree.object(key("unknown-file", "object"), length: 8400)
      try tree.put(object)
      let shard = (object.dataPath as NSString).deletingLastPathComponent
      let strays = [
        "notes.txt", "backup/old.bin", "objects/README", "objects/zz/readme.txt",
        "\(shard)/\(object.id.hex).data.bak", "\(shard)/\(object.id.hex.uppercased()).manifest",
        "tmp/subdir/file",
      ]
      for stray in strays { try tree.write(stray, "not a cache file: \(stray)\n") }
      let others = try bystander(tree, "unknown-file")
      let found = [
        finding("backup", .unknownEntry, .warning),
        finding("notes.txt", .unknownEntry, .warning),
        finding("objects/README", .unknownEntry, .warning),
        finding("objects/zz", .badShardName, .warning),
        finding("objects/zz/readme.txt", .unknownEntry, .warning),
        finding("\(shard)/\(object.id.hex).data.bak", .unknownEntry, .warning),
        finding("\(shard)/\(object.id.hex.uppercased()).manifest", .unknownEntry, .warning),
        finding("tmp/subdir", .unknownEntry, .warning),
      ]
      return Expectations(
        check: clean(0, found), repair: clean(0, found),
        recheck: clean(0, totals: totals(objects: 2, complete: 2), found),
        untouched: others + strays + [object.dataPath, object.manifestPath])
    },

    FixtureCase(
      name: "missing-format",
      exercises: "no FORMAT marker, objects healthy: missing-format; repair writes the marker"
    ) { tree in
      try tree.remove(CacheFormat.fileName)
      let object = try tree.object(key("missing-format", "object"), length: 8400)
      try tree.put(object)
      let others = try bystander(tree, "missing-format")
      return singleError(
        finding(CacheFormat.fileName, .missingFormatMarker), recheck: totals(objects: 2, complete: 2),
        untouched: others + [object.dataPath, object.manifestPath])
    },

    FixtureCase(
      name: "pinned-partial",
      exercises:
        "pinned partial objects: one healthy with garbage in its unlisted chunk (must not be reported), one of "
        + "unknown length with a flipped byte in chunk 1 (chunk-crc; repair drops the chunk, keeps the object "
        + "and its pin)"
    ) { tree in
      let healthy = try tree.object(
        key("pinned-partial", "healthy"), length: 12500, present: [0, 1, 3], pinned: true, unlistedSeed: 7)
      var damaged = try tree.object(
        key("pinned-partial", "damaged"), length: nil, dataLength: 8192, present: [0, 1], pinned: true)
      damaged.flipDataByte(at: 4096 + 7, mask: 0x80)
      try tree.put(healthy)
      try tree.put(damaged)
      let others = try bystander(tree, "pinned-partial")
      return singleError(
        finding(damaged.dataPath, .chunkChecksum, chunk: 1),
        recheck: totals(objects: 3, complete: 1, partial: 2, pinned: 2),
        untouched: others + [healthy.dataPath, healthy.manifestPath, damaged.dataPath])
    },

    FixtureCase(
      name: "invalid-manifest-field",
      exercises:
        "manifest with an unknown flag bit set (CRC valid): invalid-manifest; repair removes the object"
    ) { tree in
      var flagged = try tree.object(key("invalid-manifest-field", "flagged"), length: 8400)
      flagged.manifestBytes[6] |= 0x04
      flagged.resealManifest()
      try tree.put(flagged)
      let others = try bystander(tree, "invalid-manifest-field")
      return singleError(
        finding(flagged.manifestPath, .invalidManifest), recheck: totals(objects: 1, complete: 1),
        untouched: others)
    },

    FixtureCase(
      name: "several-faults",
      exercises:
        "many faults at once: unparsable FORMAT, unknown root file, stale tmp/ file, object with two bad "
        + "chunks, misplaced object with a bad chunk (reported at its old path, repaired at its new one), "
        + "orphan data, bad manifest CRC, orphan manifest; repair fixes every error and leaves the warning"
    ) { tree in
      let name = "several-faults"
      try tree.write(CacheFormat.fileName, "mediacache-format\n")
      var twoBad = try tree.object(key(name, "two-bad-chunks"), length: 8400)
      twoBad.flipDataByte(at: 10)
      twoBad.flipDataByte(at: 8192 + 100, mask: 0x10)
      var moved = try tree.object(key(name, "misplaced-and-bad"), length: 8400)
      moved.flipDataByte(at: 4096 + 4095, mask: 0x02)
      moved.dataPath = "objects/\(tree.wrongShard(for: moved.id))/\(moved.id.hex).data"
      moved.manifestPath = "objects/\(tree.wrongShard(for: moved.id))/\(moved.id.hex).manifest"
      let orphanData = try tree.object(key(name, "orphan-data"), length: 3000)
      var badCRC = try tree.object(key(name, "bad-crc"), length: 3000)
      badCRC.manifestBytes[badCRC.manifestBytes.count - 1] ^= 0xFF
      let orphanManifest = try tree.object(key(name, "orphan-manifest"), length: 3000)
      try tree.put(twoBad)
      try tree.put(moved)
      try tree.put(orphanData, manifest: false)
      try tree.put(badCRC)
      try tree.put(orphanManifest, data: false)
      try tree.write("notes.txt", "an operator's note, not a cache file\n")
      let staleStaging = "tmp/stale.\(badCRC.id.hex).4242.99.manifest"
      let youngStaging = "tmp/\(badCRC.id.hex).4243.100.manifest"
      try tree.write(staleStaging, badCRC.manifestBytes)
      try tree.write(youngStaging, badCRC.manifestBytes)
      let others = try bystander(tree, name)
      let check = [
        finding(CacheFormat.fileName, .badFormatMarker),
        finding("notes.txt", .unknownEntry, .warning),
        finding(staleStaging, .staleTemporaryFile),
        finding(moved.dataPath, .misplacedFile),
        finding(moved.manifestPath, .misplacedFile),
        finding(moved.dataPath, .chunkChecksum, chunk: 1),
        finding(twoBad.dataPath, .chunkChecksum, chunk: 0),
        finding(twoBad.dataPath, .chunkChecksum, chunk: 2),
        finding(orphanData.dataPath, .orphanData),
        finding(badCRC.manifestPath, .manifestChecksum),
        finding(orphanManifest.manifestPath, .missingData),
      ]
      let repair = [
        finding(CacheFormat.fileName, .badFormatMarker, action: .repaired),
        finding("notes.txt", .unknownEntry, .warning),
        finding(staleStaging, .staleTemporaryFile, action: .repaired),
        finding(moved.dataPath, .misplacedFile, action: .repaired),
        finding(moved.manifestPath, .misplacedFile, action: .repaired),
        finding(moved.rightDataPath, .chunkChecksum, chunk: 1, action: .repaired),
        finding(twoBad.dataPath, .chunkChecksum, chunk: 0, action: .repaired),
        finding(twoBad.dataPath, .chunkChecksum, chunk: 2, action: .repaired),
        finding(orphanData.dataPath, .orphanData, action: .repaired),
        finding(badCRC.manifestPath, .manifestChecksum, action: .repaired),
        finding(orphanManifest.manifestPath, .missingData, action: .repaired),
      ]
      return Expectations(
        check: clean(4, check), repair: clean(1, repair),
        recheck: clean(
          0, totals: totals(objects: 3, complete: 1, partial: 2),
          [finding("notes.txt", .unknownEntry, .warning)]),
        untouched: others + ["notes.txt", youngStaging, twoBad.dataPath])
    },
  ]
}
