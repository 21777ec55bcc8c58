import Foundation
import MediaCache
import MediaCacheTestSupport

/// SIGKILL of `cache-compactor` during a pass that evicts by age and size, reaps `tmp/` and scrubs chunks (some
/// corrupt on purpose), then restarts that must finish the work.
func compactorKillTrial(_ context: TrialContext, _ environment: Environment) {
  var random = SeededRandom(seed: context.seed)
  let log = CommandLog(directory: context.directory)
  let root = "\(context.directory)/cache"
  let checks = Checks(context: context, binaries: environment.binaries, log: log, root: root)
  let chunkSize = 65_536
  var placed: [PlacedObject]
  var damaged: [String: Set<Int>] = [:]
  var aged = Set<String>()
  do {
    placed = try writeTree(
      root: root, origin: environment.origin, count: Int.random(in: 24...48, using: &random), prefix: "ck",
      chunkSize: chunkSize, pinnedShare: 0.1, days: 40, random: &random)
    // Some objects were last used 100 days ago: the age limit takes them.
    for index in placed.indices where random.seconds(0...1) < 0.15 {
      setModificationTime(objectPaths(root, placed[index].object.id).manifest, now() - 100 * 86_400)
      aged.insert(placed[index].object.name)
    }
    // Corrupt chunks for the scrub to find.
    for _ in 0..<Int.random(in: 1...3, using: &random) {
      let item = placed.randomElement(using: &random)!
      let index = item.listed.randomElement(using: &random)!
      try corruptChunk(root: root, item, index, random: &random)
      damaged[item.object.name, default: []].insert(index)
    }
    for _ in 0..<Int.random(in: 0...4, using: &random) {
      try leaveStaleTemporaryFile(root: root, age: 7200, random: &random)
    }
  } catch {
    context.fail("cannot build the tree: \(error)")
    return
  }
  let objects = placed.map(\.object)
  let before = treeBytes(root: root).total
  let maxSize = Int64(Double(before) * Double.random(in: 0.3...0.7, using: &random))
  let arguments = [
    root, "--max-size", "\(maxSize)", "--max-age", "60d", "--scrub", "1G", "--tmp-grace", "600s",
  ]
  let allowedChunks = Set(
    damaged.flatMap { name, chunks -> [String] in
      let item = placed.first { $0.object.name == name }!
      let hex = item.object.id.hex
      return chunks.map { "objects/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))/\(hex).data#\($0)" }
    })

  // A dry run first: it must succeed, change nothing, and it times a pass for the kill.
  guard
    let dry = try? runCommand(environment.binaries.compactor, arguments + ["--dry-run"], log: log, tag: "dry")
  else { return context.fail("cannot run cache-compactor") }
  if dry.status != 0 { context.fail("dry run: \(dry.summary)") }
  let after = random.seconds(0...(dry.seconds * 1.3))
  let paths = log.paths("compactor")
  let spawned = monotonicSeconds()
  guard
    let child = try? Child(environment.binaries.compactor, arguments, stdout: paths.out, stderr: paths.err)
  else { return context.fail("cannot start cache-compactor") }
  sleepSeconds(after)
  if child.killNow(log: log, started: spawned) {
    context.tally.fault()
  } else {
    context.tally.count("passes done before the kill")
    if child.poll() != .exited(0) {
      context.fail("`\(child.label)` ended \(child.poll()!): \(child.stderrText)")
    }
  }

  let when =
    "after the kill at \(String(format: "%.3f", after)) s (pass ~\(String(format: "%.3f", dry.seconds)) s)"
  let audits = checks.auditAll(objects, damaged: damaged, when: when)
  for item in placed {
    guard let audit = audits[item.object.name], let manifest = audit.manifest else {
      if item.pinned { context.fail("\(when): pinned object \(item.object.name) was removed") }
      continue
    }
    let listed = Set(manifest.chunkCRCs.keys)
    let good = item.listed.subtracting(damaged[item.object.name] ?? [])
    if !good.isSubset(of: listed) {
      context.fail("\(when): \(item.object.name) lost good chunks \(good.subtracting(listed).sorted())")
    }
    if !listed.isSubset(of: item.listed) {
      context.fail(
        "\(when): \(item.object.name) lists chunks never written \(listed.subtracting(item.listed).sorted())")
    }
  }
  checks.fsckCheck(
    allowed: ["chunk-crc", "orphan-data", "stale-tmp"], allowedChunkPaths: allowedChunks, when: when)

  // Where the kill landed: had the pass changed anything, and was anything left for the restart?
  let changedByKill = treeBytes(root: root).total != before
  var leftForRestart = false
  // The restart: two passes (the second finishes a scrub the first began mid-way, after the cursor).
  for pass in 1...2 {
    guard
      let finished = try? runCommand(
        environment.binaries.compactor, arguments, log: log, tag: "compactor-restart")
    else { return context.fail("cannot run the restart") }
    if finished.status != 0 { context.fail("restart pass \(pass): \(finished.summary)") }
    if pass == 1 {
      leftForRestart =
        !finished.text.contains("evicted 0 ") || !finished.text.contains("dropped 0;")
        || !finished.text.contains("orphan data removed 0;")
    }
  }
  switch (changedByKill, leftForRestart) {
  case (false, _): context.tally.count("kills before any change")
  case (true, true): context.tally.count("kills mid-pass")
  case (true, false): context.tally.count("kills after the work")
  }
  let finalWhen = "after the restart"
  let final = checks.auditAll(objects, when: finalWhen)
  let (total, remaining) = treeBytes(root: root)
  let unpinnedLeft = placed.filter { !$0.pinned && remaining.contains($0.object.id.hex) }
  if total > maxSize && !unpinnedLeft.isEmpty {
    context.fail(
      "\(finalWhen): \(total) bytes on disk, over --max-size \(maxSize) with \(unpinnedLeft.count) unpinned objects left"
    )
  }
  for item in placed where aged.contains(item.object.name) && !item.pinned {
    if remaining.contains(item.object.id.hex) {
      context.fail("\(finalWhen): \(item.object.name), idle 100 days, is still there")
    }
  }
  for item in placed where item.pinned {
    let listed = Set(final[item.object.name]?.manifest.map { Array($0.chunkCRCs.keys) } ?? [])
    if listed != item.listed.subtracting(damaged[item.object.name] ?? []) {
      context.fail(
        "\(finalWhen): pinned \(item.object.name) lists \(listed.sorted()), wrote \(item.listed.sorted())")
    }
  }
  let staleLeft = ((try? FileManager.default.contentsOfDirectory(atPath: "\(root)/tmp")) ?? []).filter {
    name in
    let attributes = try? FileManager.default.attributesOfItem(atPath: "\(root)/tmp/\(name)")
    let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? now()
    return now() - modified > 600
  }
  if !staleLeft.isEmpty { context.fail("\(finalWhen): stale tmp files left: \(staleLeft)") }
  // A removal the kill cut in two (manifest gone, data file left) is finished by the restart too.
  checks.fsckCheck(allowed: [], when: finalWhen)
  if let repaired = try? runFsck(environment.binaries, root, repair: true, log: log),
    ![0, 1].contains(repaired.finished.status ?? -1)
  {
    context.fail("\(finalWhen): \(repaired.finished.summary)")
  }
  checks.fsckCheck(allowed: [], requireClean: true, when: "after the restart and a repair")
  if let complete = placed.first(where: { final[$0.object.name]?.manifest?.isComplete == true }) {
    checks.catCheck(complete.object, nil, when: finalWhen)
  }
  checks.securityScan(objects, when: finalWhen)
}
