import Foundation
import MediaCache
import MediaCacheTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What a trial did to one object of the tree before `cache-fsck --repair` ran.
private enum Damage: String {
  case none, corruptChunks, shortData, orphanData, missingData, badManifest, misplaced

  /// The finding kind `cache-fsck` must report for it.
  var kind: String? {
    switch self {
    case .none: nil
    case .corruptChunks: "chunk-crc"
    case .shortData: "short-data"
    case .orphanData: "orphan-data"
    case .missingData: "missing-data"
    case .badManifest: "bad-manifest-crc"
    case .misplaced: "misplaced"
    }
  }
}

/// SIGKILL of `cache-fsck --repair` on a tree with every kind of damage it repairs, then a restart that must
/// repair everything, drop exactly the bad chunks and never a good one.
func fsckKillTrial(_ context: TrialContext, _ environment: Environment) {
  var random = SeededRandom(seed: context.seed)
  let log = CommandLog(directory: context.directory)
  let root = "\(context.directory)/cache"
  let checks = Checks(context: context, binaries: environment.binaries, log: log, root: root)
  let chunkSize = 65_536
  var placed: [PlacedObject]
  var damage: [String: Damage] = [:]
  var damaged: [String: Set<Int>] = [:]
  var injectedKinds = Set<String>()
  var wrongPaths: [String: (data: String, manifest: String)] = [:]
  var unknownEntries: [String] = []
  do {
    placed = try writeTree(
      root: root, origin: environment.origin, count: Int.random(in: 16...32, using: &random), prefix: "fs",
      chunkSize: chunkSize, pinnedShare: 0.1, days: 10, random: &random)
    var order = Array(placed.indices.shuffled(using: &random))
    func take(_ kind: Damage, where accept: (PlacedObject) -> Bool = { _ in true }) -> PlacedObject? {
      guard let position = order.firstIndex(where: { accept(placed[$0]) }) else { return nil }
      let item = placed[order.remove(at: position)]
      damage[item.object.name] = kind
      injectedKinds.insert(kind.kind!)
      return item
    }
    for _ in 0..<2 {
      guard let item = take(.corruptChunks) else { break }
      for index in item.listed.shuffled(using: &random).prefix(Int.random(in: 1...2, using: &random)) {
        try corruptChunk(root: root, item, index, random: &random)
        damaged[item.object.name, default: []].insert(index)
      }
    }
    if let item = take(.shortData, where: { $0.chunkCount >= 3 && $0.listed.count == $0.chunkCount }) {
      // Cut inside the next-to-last chunk: it and the last one reach past the end.
      let cut =
        item.range(ofChunk: item.chunkCount - 2).lowerBound
        + Int64.random(in: 1..<Int64(chunkSize), using: &random)
      guard truncate(objectPaths(root, item.object.id).data, off_t(cut)) == 0 else {
        throw TortureError("truncate: \(errnoText())")
      }
      damaged[item.object.name] = Set(item.listed.filter { item.range(ofChunk: $0).upperBound > cut })
    }
    if let item = take(.orphanData) { unlink(objectPaths(root, item.object.id).manifest) }
    if let item = take(.missingData) { unlink(objectPaths(root, item.object.id).data) }
    if let item = take(.badManifest) { try corruptManifest(root: root, item, random: &random) }
    if let item = take(.misplaced) {
      let hex = item.object.id.hex
      let wrongOuter = String(hex.prefix(2)) == "00" ? "01" : "00"
      let directory = "\(root)/objects/\(wrongOuter)/\(hex.dropFirst(2).prefix(2))"
      mkdir("\(root)/objects/\(wrongOuter)", 0o700)
      mkdir(directory, 0o700)
      let right = objectPaths(root, item.object.id)
      let wrong = (data: "\(directory)/\(hex).data", manifest: "\(directory)/\(hex).manifest")
      guard rename(right.data, wrong.data) == 0, rename(right.manifest, wrong.manifest) == 0 else {
        throw TortureError("rename: \(errnoText())")
      }
      rmdir(right.directory)
      rmdir((right.directory as NSString).deletingLastPathComponent)
      wrongPaths[item.object.name] = wrong
    }
    for _ in 0..<Int.random(in: 1...3, using: &random) {
      try leaveStaleTemporaryFile(root: root, age: 7200, random: &random)
    }
    injectedKinds.insert("stale-tmp")
    if random.seconds(0...1) < 0.25 {
      try writeWholeFile("\(root)/FORMAT", Array("mediacache-format garbage\n".utf8))
      injectedKinds.insert("bad-format")
    }
    // Files the checker must report and never delete.
    unknownEntries = [
      "\(root)/operator-notes.txt", "\(objectPaths(root, placed[order[0]].object.id).directory)/README",
    ]
    for path in unknownEntries { try writeWholeFile(path, Array("keep me\n".utf8)) }
  } catch {
    context.fail("cannot build the tree: \(error)")
    return
  }
  let objects = placed.map(\.object)
  let allowedChunks = Set(
    damaged.flatMap { name, chunks -> [String] in
      let hex = placed.first { $0.object.name == name }!.object.id.hex
      return chunks.map { "objects/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))/\(hex).data#\($0)" }
    })

  // The check finds every damage (and nothing on healthy objects); it also times a pass for the kill.
  guard
    let check = checks.fsckCheck(
      allowed: injectedKinds, allowedChunkPaths: allowedChunks, when: "before the repair")
  else { return }
  for item in placed {
    let hex = item.object.id.hex
    let kinds = Set(check.errors.filter { $0.path.contains(hex) }.map(\.kind))
    if let kind = damage[item.object.name]?.kind, !kinds.contains(kind) {
      context.fail(
        "before the repair: cache-fsck -n missed \(kind) of \(item.object.name) (found \(kinds.sorted()))")
    }
  }
  let duration = check.finished.seconds
  let after = random.seconds(0...(duration * 1.3))
  let paths = log.paths("fsck-repair-killed")
  let spawned = monotonicSeconds()
  guard
    let child = try? Child(
      environment.binaries.fsck, [root, "--repair", "--json"], stdout: paths.out, stderr: paths.err)
  else { return context.fail("cannot start cache-fsck --repair") }
  sleepSeconds(after)
  if child.killNow(log: log, started: spawned) {
    context.tally.fault()
  } else {
    context.tally.count("repairs done before the kill")
    if child.poll() != .exited(0) && child.poll() != .exited(1) {
      context.fail("`\(child.label)` ended \(child.poll()!): \(child.stderrText)")
    }
  }

  let when =
    "after the kill at \(String(format: "%.3f", after)) s (check ~\(String(format: "%.3f", duration)) s)"
  for item in placed {
    let name = item.object.name
    let right = objectPaths(root, item.object.id)
    switch damage[name] ?? Damage.none {
    case .none, .corruptChunks, .shortData:
      let audit = checks.auditAll([item.object], damaged: damaged, when: when)[name]!
      guard let manifest = audit.manifest else {
        context.fail("\(when): \(name) (\(damage[name] ?? .none)) lost its manifest")
        continue
      }
      let listed = Set(manifest.chunkCRCs.keys)
      let good = item.listed.subtracting(damaged[name] ?? [])
      if !good.isSubset(of: listed) {
        context.fail("\(when): \(name) lost good chunks \(good.subtracting(listed).sorted())")
      }
      if !listed.isSubset(of: item.listed) { context.fail("\(when): \(name) lists chunks never written") }
    case .orphanData:
      if fileExists(right.manifest) { context.fail("\(when): orphan \(name) has a manifest again") }
    case .missingData:
      if fileExists(right.data) { context.fail("\(when): \(name) has a data file again") }
    case .badManifest:
      let audit = auditObject(root: root, item.object)
      if audit.manifest != nil { context.fail("\(when): \(name)'s corrupt manifest decodes") }
    case .misplaced:
      let wrong = wrongPaths[name]!
      if fileExists(right.data) == fileExists(wrong.data)
        || fileExists(right.manifest) == fileExists(wrong.manifest)
      {
        context.fail("\(when): misplaced \(name) is in neither place or both")
      } else if fileExists(right.data) && fileExists(right.manifest) {
        checks.auditAll([item.object], when: when)
      }
    }
  }
  if let afterKill = checks.fsckCheck(
    allowed: injectedKinds.union(["orphan-data"]), allowedChunkPaths: allowedChunks, when: when)
  {
    // Where the kill landed: how much of the damage was left.
    let left = afterKill.errors.count
    let found = check.errors.count
    context.tally.count(
      left >= found ? "kills before any repair" : left == 0 ? "kills after the repair" : "kills mid-repair")
  }

  // The restart repairs what is left.
  guard let repaired = try? runFsck(environment.binaries, root, repair: true, log: log) else {
    return context.fail("cannot run the restart")
  }
  if ![0, 1].contains(repaired.finished.status ?? -1) {
    context.fail("restart: \(repaired.finished.summary)")
  }
  let finalWhen = "after the restart"
  checks.fsckCheck(allowed: [], requireClean: true, when: finalWhen)
  let audits = checks.auditAll(objects, when: finalWhen)
  for item in placed {
    let name = item.object.name
    let right = objectPaths(root, item.object.id)
    let listed = Set(audits[name]?.manifest.map { Array($0.chunkCRCs.keys) } ?? [])
    switch damage[name] ?? Damage.none {
    case .none, .misplaced, .corruptChunks, .shortData:
      let expected = item.listed.subtracting(damaged[name] ?? [])
      if listed != expected {
        context.fail(
          "\(finalWhen): \(name) (\(damage[name] ?? .none)) lists \(listed.sorted()), expected \(expected.sorted())"
        )
      }
      if let wrong = wrongPaths[name], fileExists(wrong.data) || fileExists(wrong.manifest) {
        context.fail("\(finalWhen): misplaced \(name) still has files in the wrong shard")
      }
    case .orphanData, .missingData, .badManifest:
      if fileExists(right.data) || fileExists(right.manifest) {
        context.fail("\(finalWhen): \(name) (\(damage[name]!)) still has files")
      }
    }
  }
  for path in unknownEntries where !fileExists(path) { context.fail("\(finalWhen): \(path) was deleted") }
  // The stale staging files are gone; a young one may be left by the killed repair's own commit (reaped after
  // the grace period, like any writer's).
  let stale = ((try? FileManager.default.contentsOfDirectory(atPath: "\(root)/tmp")) ?? []).filter { name in
    let attributes = try? FileManager.default.attributesOfItem(atPath: "\(root)/tmp/\(name)")
    return now() - ((attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? now()) > 3600
  }
  if !stale.isEmpty { context.fail("\(finalWhen): tmp/ still holds stale files \(stale)") }
  if let complete = placed.first(where: {
    audits[$0.object.name]?.manifest?.isComplete == true && damage[$0.object.name] == nil
  }) {
    checks.catCheck(complete.object, nil, when: finalWhen)
  }
  checks.securityScan(objects, when: finalWhen)
}
