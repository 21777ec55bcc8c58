import Foundation
import MediaCache
import MediaCacheTestSupport
import Synchronization

/// Four workers keep `mediacache` processes (fetch, cat, import, rm, status, and GETs through one long-lived
/// proxy) reading and writing six overlapping objects, beside `cache-compactor` with a tiny size limit and
/// `cache-fsck -n` in a loop, for `minutes`. No wrong byte, no crash, no hang (every command has a timeout), every
/// check clean; afterwards every object can be completed and reads back right.
func manyProcessesRun(_ context: TrialContext, _ environment: Environment, minutes: Double) {
  var random = SeededRandom(seed: context.seed)
  let log = CommandLog(directory: context.directory)
  let root = "\(context.directory)/cache"
  let checks = Checks(context: context, binaries: environment.binaries, log: log, root: root)
  let binaries = environment.binaries
  var objects: [OriginObject] = []
  for index in 0..<6 {
    let size = Int.random(in: 200_000...4_000_000, using: &random)
    let name = "mp-\(index)-\(random.token())"
    // One slow object keeps long fetches overlapping the others.
    let url =
      index == 0
      ? environment.origin.url(.slow, name, size: size, query: "delay-ms=2")
      : environment.origin.url(.normal, name, size: size)
    objects.append(OriginObject(name: name, size: size, url: url))
  }
  // Whole copies of the objects for `mediacache import --range`.
  let sources = "\(context.directory)/sources"
  try? FileManager.default.createDirectory(atPath: sources, withIntermediateDirectories: true)
  for object in objects {
    do { try writeWholeFile("\(sources)/\(object.name)", object.bytes(0..<Int64(object.size))) } catch {
      return context.fail("\(error)")
    }
  }
  // The cache exists before the compactor starts (it does not create one).
  guard
    let first = try? runCommand(
      binaries.mediacache, ["fetch", "--cache", root, objects[1].url], log: log, tag: "fetch"),
    first.status == 0
  else { return context.fail("the first fetch failed") }

  let proxy: ProxyProcess
  do {
    proxy = try ProxyProcess.start(binaries, cache: root, extra: ["--durability", "relaxed"], log: log)
  } catch {
    return context.fail("\(error)")
  }
  let compactorPaths = log.paths("compactor")
  guard
    let compactor = try? Child(
      binaries.compactor,
      [root, "--max-size", "3M", "--scrub", "8M", "--interval", "0.3s", "--tmp-grace", "60s"],
      stdout: compactorPaths.out, stderr: compactorPaths.err)
  else {
    proxy.child.killNow()
    return context.fail("cannot start cache-compactor")
  }

  /// Runs a mediacache command; any exit status outside `allowed`, a crash or a hang is a failure.
  @discardableResult
  @Sendable func run(_ tag: String, _ arguments: [String], allowed: Set<Int32>) -> Finished? {
    guard let finished = try? runCommand(binaries.mediacache, arguments, log: log, tag: tag, timeout: 120)
    else {
      context.fail("cannot run mediacache \(tag)")
      return nil
    }
    context.tally.count("mediacache \(tag)")
    if let status = finished.status, allowed.contains(status) { return finished }
    context.fail("beside the others: \(finished.summary)")
    return nil
  }

  let stop = StopFlag()
  let deadline = monotonicSeconds() + minutes * 60
  let group = DispatchGroup()
  // cache-fsck -n in a loop: it must never report an error while the others work.
  DispatchQueue.global().async(group: group) {
    while !stop.isSet {
      guard let result = try? runFsck(binaries, root, repair: false, log: log, timeout: 120) else {
        context.fail("cannot run cache-fsck")
        return
      }
      context.tally.count("fsck -n runs")
      context.tally.fault()
      if result.finished.status != 0 || !result.errors.isEmpty || result.parseError != nil {
        context.fail(
          "cache-fsck -n beside the others: \(result.finished.outcome); "
            + (result.parseError ?? result.errors.prefix(5).map(\.description).joined(separator: "; ")))
      }
    }
  }
  let replacements = Replacements(objects: objects.count)
  let workerSeeds = (0..<4).map { _ in random.next() }
  for worker in 0..<4 {
    let seed = workerSeeds[worker]
    let allObjects = objects
    DispatchQueue.global().async(group: group) {
      var random = SeededRandom(seed: seed)
      while monotonicSeconds() < deadline && !stop.isSet {
        let index = Int.random(in: 0..<allObjects.count, using: &random)
        let object = allObjects[index]
        let start = Int64.random(in: 0..<Int64(object.size), using: &random)
        let range = start..<min(Int64(object.size), start + Int64.random(in: 1...1_500_000, using: &random))
        let spec = "\(range.lowerBound)-\(range.upperBound - 1)"
        let choice = Int.random(in: 0..<100, using: &random)
        context.tally.fault()
        switch choice {
        case 0..<30:
          // Exit 2 ("missing bytes") is allowed: another process replaced the object while this fetch ran (a
          // whole import is a new version; the proxy writes 1 MiB chunks, these fetches 64 KiB ones), and the
          // merge rules discard the fetch's chunks rather than mix versions. With one chunk size and no whole
          // imports no fetch exits 2 (see docs/RELIABILITY.md).
          let fetched = run(
            "fetch",
            [
              "fetch", "--cache", root, "--chunk-size", "65536", "--durability", "relaxed", object.url,
              "--range", spec,
            ],
            allowed: [0, 2])
          if let fetched, fetched.status == 2 {
            if fetched.stderr.contains("is missing bytes") {
              context.tally.count("fetches outrun by a replacement (exit 2)")
            } else {
              context.fail("beside the others: \(fetched.summary)")
            }
          }
        case 30..<55:
          guard
            let finished = run(
              "cat", ["cat", "--cache", root, object.url, "--range", spec], allowed: [0, 2])
          else { break }
          if finished.status == 0 {
            if let difference = compare(finished.stdout, object, range) {
              context.fail("mediacache cat beside the others: \(difference)")
            } else {
              context.tally.verified(Int64(range.count))
            }
          } else {
            context.tally.count("cat misses")
          }
        case 55..<80:
          let before = replacements.mark(index)
          let result = proxyGet(port: proxy.port, object, range: range)
          context.tally.count("proxy GETs")
          context.tally.verified(result.bodyBytes)
          if let wrong = result.wrongByteAt {
            context.fail("the proxy sent a wrong byte of \(object.name) at \(wrong)")
          } else if !result.complete {
            // A response goes on from the origin under its ETag when another process replaces the object
            // mid-body (docs/RELIABILITY.md, bug 42). One sent without an ETag (the version it began with was
            // imported, its validators unknown) cannot be asked for again: a cut after its head is the right
            // answer then, and only then.
            if result.status != nil, result.etag == nil, replacements.overlapped(index, since: before) {
              context.tally.count("proxy responses without an ETag cut by a replacement")
            } else {
              context.fail("proxy GET \(object.name) \(spec): \(result)")
            }
          }
        case 80..<90:
          run(
            "import",
            [
              "import", "--cache", root, "--chunk-size", "65536", object.url, "\(sources)/\(object.name)",
              "--range", spec, "--length", "\(object.size)",
            ], allowed: [0])
        case 90..<93:
          // A whole import replaces the object (a new version with the same bytes) under everyone's feet.
          replacements.begin(index)
          run(
            "import",
            ["import", "--cache", root, "--chunk-size", "65536", object.url, "\(sources)/\(object.name)"],
            allowed: [0])
          replacements.end(index)
        case 93..<97:
          run("rm", ["rm", "--cache", root, object.url], allowed: [0, 2, 3])
        default:
          run("status", ["status", "--cache", root, "--json", object.url], allowed: [0])
        }
      }
    }
  }

  while monotonicSeconds() < deadline { sleepSeconds(0.2) }
  stop.set()
  group.wait()
  context.tally.trialDone()

  // How many responses went on from the origin after a replacement (bug 42), from the proxy's own count.
  let metrics = soakGet(port: proxy.port, SoakRequest(target: "/metrics"))
  let counter = "mediacache_reads_continued_from_origin_total "
  if let line = String(decoding: metrics.body, as: UTF8.self).split(separator: "\n").first(where: {
    $0.hasPrefix(counter)
  }), let value = Double(line.dropFirst(counter.count)) {
    context.tally.count("proxy reads continued from the origin after a replacement", Int64(value))
  }
  for (name, child) in [("cache-compactor", compactor), ("mediacache proxy", proxy.child)] {
    if let ended = child.poll() {
      context.fail("\(name) ended early: \(ended): \(child.stderrText)")
      continue
    }
    child.signal(SIGTERM)
    let outcome = child.wait(timeout: 30)
    if outcome != .exited(0) { context.fail("\(name) after SIGTERM: \(outcome): \(child.stderrText)") }
  }
  let passes = compactor.stdoutText.split(separator: "\n").filter { $0.hasPrefix("pass ") }
  context.tally.count("compactor passes", Int64(passes.count))
  context.tally.count(
    "compactor evictions",
    passes.reduce(0) { total, line in
      guard let range = line.range(of: "evicted ") else { return total }
      return total + (Int64(line[range.upperBound...].prefix { $0.isNumber }) ?? 0)
    })

  let when = "after \(minutes) min of many processes"
  checks.fsckCheck(allowed: [], requireClean: true, when: when)
  checks.auditAll(objects, when: when)
  // Every object can still be completed, and reads back right.
  for object in objects {
    guard
      let finished = try? runCommand(
        binaries.mediacache, ["fetch", "--cache", root, object.url], log: log, tag: "fetch-final"),
      finished.status == 0
    else {
      context.fail("\(when): the final fetch of \(object.name) failed")
      continue
    }
    checks.catCheck(object, nil, when: when)
  }
  let audits = checks.auditAll(objects, when: "\(when), completed")
  for object in objects where audits[object.name]?.manifest?.isComplete != true {
    context.fail("\(when): \(object.name) is not complete after its final fetch")
  }
  checks.fsckCheck(allowed: [], requireClean: true, when: "\(when), completed")
  checks.securityScan(objects, when: when)
}

/// The whole imports of each object, begun and running, so a proxy GET can tell whether one overlapped it.
final class Replacements: Sendable {
  private let state: Mutex<[(begun: Int, running: Int)]>

  init(objects: Int) { state = Mutex(Array(repeating: (0, 0), count: objects)) }

  func begin(_ object: Int) {
    state.withLock {
      $0[object].begun += 1
      $0[object].running += 1
    }
  }

  func end(_ object: Int) { state.withLock { $0[object].running -= 1 } }

  /// What `overlapped` compares with: the imports begun so far, and whether one is running.
  func mark(_ object: Int) -> (begun: Int, running: Bool) {
    state.withLock { ($0[object].begun, $0[object].running > 0) }
  }

  /// Whether a whole import of `object` ran at some time since `mark`.
  func overlapped(_ object: Int, since mark: (begun: Int, running: Bool)) -> Bool {
    mark.running || state.withLock { $0[object].begun > mark.begun }
  }
}
