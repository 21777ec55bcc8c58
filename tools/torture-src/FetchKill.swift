import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport

/// SIGKILL of `mediacache fetch` at random points of a download, one to three times per trial, then a
/// restart that must finish the object without fetching again any chunk the manifest listed at the kill.
func fetchKillTrial(_ context: TrialContext, _ environment: Environment) {
  var random = SeededRandom(seed: context.seed)
  let log = CommandLog(directory: context.directory)
  let root = "\(context.directory)/cache"
  let checks = Checks(context: context, binaries: environment.binaries, log: log, root: root)
  let size = Int.random(in: 300_000...6_000_000, using: &random)
  let chunkSize = [65_536, 262_144, 1 << 20].randomElement(using: &random)!
  let durability = Bool.random(using: &random) ? "durable" : "relaxed"
  // The slow mode sends 16 KiB pieces with a delay after each: about 3 s for the whole object, so that kills
  // land before the first commit (a fetch commits every second), between commits and after the last one.
  let delay = max(1, Int(3000.0 / Double(size / 16_384 + 1)))
  let name = "fk-\(context.trial)-\(random.token())"
  let url = environment.origin.url(.slow, name, size: size, query: "delay-ms=\(delay)")
  let object = OriginObject(name: name, size: size, url: url)
  let arguments = [
    "fetch", "--cache", root, "--chunk-size", "\(chunkSize)", "--durability", durability, url,
  ]
  let kills = Int.random(in: 1...3, using: &random)
  var listedAtLastKill = ByteRangeSet()
  for round in 0..<kills {
    // Mostly uniform over the download (startup included); now and then at once.
    let after = random.seconds(0...1) < 0.1 ? random.seconds(0...0.05) : random.seconds(0...3.6)
    let paths = log.paths("fetch")
    let spawned = monotonicSeconds()
    guard
      let child = try? Child(environment.binaries.mediacache, arguments, stdout: paths.out, stderr: paths.err)
    else {
      context.fail("cannot start mediacache fetch")
      return
    }
    sleepSeconds(after)
    if child.killNow(log: log, started: spawned) {
      context.tally.fault()
    } else {
      context.tally.count("fetches done before the kill")
      if child.poll() != .exited(0) {
        context.fail(
          "round \(round): `\(child.label)` ended \(child.poll()!) before the kill: \(child.stderrText)")
      }
    }
    let when = "after kill \(round + 1) of \(kills) at \(String(format: "%.3f", after)) s"
    let audits = checks.auditAll([object], when: when)
    listedAtLastKill = ByteRangeSet(audits[name]?.listedRanges ?? [])
    // Where the kill landed, as the manifest tells it.
    if listedAtLastKill.isEmpty {
      context.tally.count("kills before the first commit")
    } else if listedAtLastKill.count < Int64(size) {
      context.tally.count("kills mid-download")
    } else {
      context.tally.count("kills after the last commit")
    }
    checks.fsckCheck(allowed: ["orphan-data", "missing-format"], when: when)
    // One listed run, read through the CLI.
    if let run = listedAtLastKill.ranges.randomElement(using: &random) {
      checks.catCheck(object, run, when: when)
    }
  }

  // The restart finishes the download and asks the origin only for what was not listed.
  let before = environment.origin.requests(for: name).count
  guard
    let finished = try? runCommand(environment.binaries.mediacache, arguments, log: log, tag: "fetch-restart")
  else {
    context.fail("cannot run the restart")
    return
  }
  if finished.status != 0 { context.fail("restart: \(finished.summary)") }
  for request in environment.origin.requests(for: name).dropFirst(before) {
    guard let asked = requestedRange(request.range, size: size, sent: request.bodyBytesSent) else { continue }
    let again = listedAtLastKill.intersection(asked).count
    if again > 0 {
      context.fail("restart asked the origin again for \(again) listed bytes: \(request)")
    }
    context.tally.count("bytes fetched by restarts", Int64(request.bodyBytesSent))
  }
  let audits = checks.auditAll([object], when: "after the restart")
  if audits[name]?.manifest?.isComplete != true {
    context.fail("after the restart the object is not complete")
  }
  checks.catCheck(object, nil, when: "after the restart")
  checks.fsckCheck(allowed: [], requireClean: true, when: "after the restart")
  checks.securityScan([object], when: "after the restart")
}

/// The bytes a request actually received: from the start of its Range (0 without one), as many as were sent.
func requestedRange(_ header: String?, size: Int, sent: Int) -> Range<Int64>? {
  var start: Int64 = 0
  if let header {
    guard header.hasPrefix("bytes="), let dash = header.firstIndex(of: "-"),
      let first = Int64(header[header.index(header.startIndex, offsetBy: 6)..<dash])
    else { return nil }
    start = first
  }
  let end = min(Int64(size), start + Int64(sent))
  return start < end ? start..<end : nil
}
