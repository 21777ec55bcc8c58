import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What `mediacache-torture soak` was asked.
struct SoakOptions {
  var binaries = ""
  var work = ""
  var minutes = 2.0
  var seed: UInt64 = 1
  var players = 64
  var json: String?
}

/// The soak's sizes: a cache limit and a working set three times larger, on a file system small enough to fill.
enum SoakSizes {
  static let maxSize = 48 << 20
  static let fileSystem = 192 << 20
  static let segments = 12
}

/// Everything running at once on one cache directory for `minutes` (see tools/soak): players through
/// `mediacache proxy` checking every byte, eviction of a working set three times the limit with two objects
/// pinned, `cache-compactor --interval` scrubbing, `cache-fsck -n` every minute, an origin that misbehaves on a
/// schedule, SIGKILL and restart of the proxy every 20–60 s, a full disk once, and the proxy sampled every
/// second. Returns the exit status: 0 when no byte was wrong and every failure was explained by its fault.
func runSoak(_ options: SoakOptions) async -> Int32 {
  let binaries = Binaries(directory: options.binaries)
  do { try binaries.check() } catch {
    log("\(error)")
    return 2
  }
  log("# soak: \(options.minutes) min, \(options.players) players, seed \(options.seed)")
  let work = options.work
  let originFiles = "\(work)/origin-files"
  for directory in ["\(originFiles)/hls", "\(originFiles)/dash", "\(work)/fs", "\(work)/logs"] {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }
  let origin: TestOrigin
  do { origin = try await TestOrigin.start(fileRoot: originFiles) } catch {
    log("cannot start the test origin: \(error)")
    return 1
  }
  let tls: SoakTLSOrigin?
  let tlsNote: String
  do {
    let started = try SoakTLSOrigin.start(
      directory: "\(work)/https-origin", originPort: URLComponents(string: origin.baseURL)?.port ?? 0)
    (tls, tlsNote) = (started, "nginx on port \(started.port) (TLS, a test CA) in front of the test origin")
  } catch {
    (tls, tlsNote) = (nil, "none (\(error)); no TLS handshake fault")
  }
  let fileSystem = SoakFileSystem(path: "\(work)/fs", bytes: SoakSizes.fileSystem)
  let root = "\(fileSystem.path)/cache"
  let log = CommandLog(directory: "\(work)/logs")
  var random = SeededRandom(seed: options.seed)
  let set = SoakWorkingSet.make(origin: origin, tls: tls, files: originFiles, random: &random)
  let timeline = SoakTimeline(httpsObjects: Set(set.all.filter(\.isHTTPS).map(\.name)))
  let tally = SoakTally(timeline: timeline)
  var report = SoakReport(options: options, workingSet: set, fileSystem: fileSystem, httpsOrigin: tlsNote)

  // The pinned objects are cached whole and pinned first (which also creates the cache).
  for object in set.pinned {
    for arguments in [["fetch", "--cache", root, object.url], ["pin", "--cache", root, object.url]] {
      guard let finished = try? runCommand(binaries.mediacache, arguments, log: log, tag: arguments[0]),
        finished.status == 0
      else {
        tally.problem("cannot \(arguments[0]) the pinned object \(object.name)")
        return report.finish(tally: tally, options: options, fileSystem: fileSystem, root: root, work: work)
      }
    }
  }
  let compactorPaths = log.paths("compactor")
  let compactor: Child
  do {
    compactor = try Child(
      binaries.compactor,
      [root, "--max-size", "\(SoakSizes.maxSize)", "--scrub", "16M", "--interval", "1s", "--json"],
      stdout: compactorPaths.out, stderr: compactorPaths.err)
  } catch {
    tally.problem("cannot start cache-compactor: \(error)")
    return report.finish(tally: tally, options: options, fileSystem: fileSystem, root: root, work: work)
  }
  let proxyArguments =
    ["--max-size", "\(SoakSizes.maxSize)", "--log-level", "info", "--retries", "3"]
    + (tls.map { ["--ca-file", $0.caFile] } ?? [])
  let holder = ProxyHolder()
  let port: Int
  do {
    let proxy = try ProxyProcess.start(binaries, cache: root, extra: proxyArguments, log: log)
    port = proxy.port
    holder.set(proxy)
  } catch {
    tally.problem("cannot start the proxy: \(error)")
    compactor.killNow()
    return report.finish(tally: tally, options: options, fileSystem: fileSystem, root: root, work: work)
  }

  let began = monotonicSeconds()
  let duration = options.minutes * 60
  let stop = StopFlag()
  let world = SoakWorld(
    proxyPort: port, objects: set.objects, playlistTarget: set.playlistTarget, mpdTarget: set.mpdTarget,
    deadline: began + duration, stop: stop, tally: tally)
  let samples = Shared<[SoakSample]>([])
  let fsckLive = Shared<[String]>([])
  let counters = SoakCounters()
  let group = DispatchGroup()
  func thread(_ body: @escaping @Sendable () -> Void) {
    group.enter()
    Thread {
      body()
      group.leave()
    }.start()
  }
  let seeds = (0..<options.players).map { _ in random.next() }
  for player in 0..<options.players {
    let seed = seeds[player]
    thread { soakPlayer(player, world: world, seed: seed) }
  }
  let faultSeed = random.next()
  let killSeed = random.next()
  thread {
    sampleProxy(
      holder, port: port, began: began, stop: stop, into: samples, fileSystem: fileSystem.path, cache: root,
      tally: tally)
  }
  thread {
    runOriginFaults(
      origin: origin, tls: tls, set: set, fileSystem: fileSystem, timeline: timeline, world: world,
      began: began, counters: counters, tally: tally, seed: faultSeed)
  }
  thread {
    var random = SeededRandom(seed: killSeed)
    while world.running {
      let next = monotonicSeconds() + random.seconds(20...60)
      while world.running && monotonicSeconds() < next { sleepSeconds(0.2) }
      guard world.running, let process = holder.current.process else { break }
      let window = timeline.begin(.proxyKill)
      if process.child.killNow() { counters.add("kills") }
      var restarted = false
      for _ in 0..<50 where !restarted {
        if let proxy = try? ProxyProcess.start(
          binaries, cache: root, port: port, extra: proxyArguments, log: log)
        {
          holder.set(proxy)
          restarted = true
        } else {
          sleepSeconds(0.2)
        }
      }
      timeline.end(window)
      if restarted {
        counters.add("restarts")
      } else {
        tally.problem("the proxy did not restart on port \(port)")
      }
    }
  }
  thread {
    while world.running {
      let next = monotonicSeconds() + 60
      while world.running && monotonicSeconds() < next { sleepSeconds(0.2) }
      guard world.running else { break }
      let lines = soakFsck(binaries, root, log: log, tally: tally, when: "live")
      fsckLive.update { $0.append(contentsOf: lines) }
    }
  }
  while monotonicSeconds() < began + duration { sleepSeconds(0.5) }
  stop.set()
  group.wait()
  report.seconds = monotonicSeconds() - began

  // The end: the proxy and the compactor stop cleanly, the cache checks clean but for what kills leave, and
  // every chunk the cache lists is the origin's.
  for (name, child) in [("mediacache proxy", holder.current.process?.child), ("cache-compactor", compactor)] {
    guard let child else { continue }
    if let ended = child.poll() {
      tally.problem("\(name) ended on its own: \(ended): \(child.stderrText.suffix(500))")
      continue
    }
    child.signal(SIGTERM)
    let outcome = child.wait(timeout: 30)
    if outcome != .exited(0) {
      tally.problem("\(name) after SIGTERM: \(outcome): \(child.stderrText.suffix(500))")
    }
  }
  report.fsckFinal = soakFsck(binaries, root, log: log, tally: tally, when: "after the run")
  report.audit(root: root, set: set, origin: origin, tally: tally)
  report.compactor(output: compactor.stdoutText)
  report.samples = samples.value
  report.fsckLive = fsckLive.value
  report.counters = counters.all
  report.accessLog(directory: "\(work)/logs", timeline: timeline)
  report.timeline = timeline.all.map { window in
    SoakReport.Fault(
      kind: window.kind.rawValue, start: window.start, end: window.end ?? window.start, object: window.object)
  }
  tls?.stop()
  try? await origin.shutdown()
  return report.finish(tally: tally, options: options, fileSystem: fileSystem, root: root, work: work)
}

/// Counters the fault threads share.
final class SoakCounters: Sendable {
  private let values = Mutex<[String: Int]>([:])
  func add(_ name: String, _ amount: Int = 1) { values.withLock { $0[name, default: 0] += amount } }
  var all: [String: Int] { values.withLock { $0 } }
}

/// `cache-fsck -n` beside the running cache: every error must be one a live cache shows after a kill (a data
/// file whose writer died before its first commit, a staging file of a killed process), each counted with
/// its explanation; anything else is a failure.
func soakFsck(_ binaries: Binaries, _ root: String, log: CommandLog, tally: SoakTally, when: String)
  -> [String]
{
  let explained = [
    "orphan-data": "a data file whose writer was killed before its first commit",
    "stale-tmp": "a staging file of a killed process",
  ]
  guard let result = try? runFsck(binaries, root, repair: false, log: log, timeout: 300) else {
    tally.problem("\(when): cannot run cache-fsck")
    return []
  }
  if let parseError = result.parseError {
    tally.problem("\(when): \(parseError)")
    return []
  }
  var lines: [String] = []
  for finding in result.findings {
    if finding.severity == "error", explained[finding.kind] == nil {
      tally.problem("\(when): cache-fsck -n: \(finding)")
    }
    lines.append("\(finding.severity) \(finding.kind): \(explained[finding.kind] ?? finding.message)")
  }
  if result.finished.status != 0 && result.finished.status != 4 {
    tally.problem("\(when): \(result.finished.summary)")
  }
  return lines.isEmpty ? ["clean"] : lines
}

/// The origin's misbehaviour: a fault every 8–20 s (503 bursts, cut bodies, slow bodies, and with an HTTPS
/// origin failed TLS handshakes, each a few seconds), one object's ETag changed at 35% of the run, and the
/// cache's file system filled at 55% for 4 s.
func runOriginFaults(
  origin: TestOrigin, tls: SoakTLSOrigin?, set: SoakWorkingSet, fileSystem: SoakFileSystem,
  timeline: SoakTimeline, world: SoakWorld, began: Double, counters: SoakCounters, tally: SoakTally,
  seed: UInt64
) {
  var random = SeededRandom(seed: seed)
  let duration = world.deadline - began
  var etagDone = false
  var diskDone = false
  var next = began + random.seconds(5...12)
  func wait(_ seconds: Double) {
    let end = monotonicSeconds() + seconds
    while world.running && monotonicSeconds() < end { sleepSeconds(0.1) }
  }
  while world.running {
    let elapsed = monotonicSeconds() - began
    if !etagDone && elapsed >= duration * 0.35 {
      etagDone = true
      origin.setVersion(name: set.changed.name, to: 1)
      let window = timeline.begin(.etagChange, object: set.changed.name)
      timeline.end(window, at: now() + 30)
      counters.add(SoakTimeline.Kind.etagChange.rawValue)
    }
    if !diskDone && elapsed >= duration * 0.55 {
      diskDone = true
      if fileSystem.isSmall {
        fileSystem.fill(seconds: 4, timeline: timeline, counters: counters)
      }
    }
    if monotonicSeconds() >= next, let tls, Int.random(in: 0..<4, using: &random) == 0 {
      // The HTTPS origin's certificate rollout gone wrong, for 3-6 s.
      let window = timeline.begin(.tlsHandshake)
      if !tls.present(trusted: false) {
        tally.problem("the HTTPS origin did not present its self-signed certificate within 5 s")
      }
      wait(random.seconds(3...6))
      if !tls.present(trusted: true) {
        tally.problem("the HTTPS origin did not present its CA-issued certificate again within 5 s")
      }
      timeline.end(window)
      counters.add(SoakTimeline.Kind.tlsHandshake.rawValue)
      next = monotonicSeconds() + random.seconds(8...20)
    } else if monotonicSeconds() >= next {
      let (fault, kind, seconds): (TestOrigin.Fault, SoakTimeline.Kind, Double) =
        switch Int.random(in: 0..<3, using: &random) {
        case 0: (.serverErrors, .serverErrors, random.seconds(2...4))
        case 1: (.cutBodies, .cutBodies, random.seconds(3...6))
        default: (.slowBodies(delayMilliseconds: 5), .slowBodies, random.seconds(4...8))
        }
      origin.setFault(fault)
      let window = timeline.begin(kind)
      wait(seconds)
      origin.setFault(nil)
      timeline.end(window)
      counters.add(kind.rawValue)
      next = monotonicSeconds() + random.seconds(8...20)
    }
    sleepSeconds(0.1)
  }
  origin.setFault(nil)
}

/// The soak's file system: a tmpfs of `bytes` mounted at `path` when the soak may mount one (root), so the
/// disk can be filled; else a plain directory (and no full-disk fault).
struct SoakFileSystem: Sendable {
  let path: String
  let isSmall: Bool
  let note: String

  init(path: String, bytes: Int) {
    self.path = path
    let status =
      (try? runQuiet("/bin/mount", ["-t", "tmpfs", "-o", "size=\(bytes),mode=0700", "tmpfs", path])) ?? -1
    isSmall = status == 0
    note =
      isSmall
      ? "tmpfs of \(bytes >> 20) MiB"
      : "a plain directory (mount -t tmpfs failed: not root?); no full-disk fault"
  }

  /// Fills the file system with a file of zeros until a write fails with ENOSPC, keeps it full for `seconds`
  /// (writing again whatever evictions free), then deletes the file.
  func fill(seconds: Double, timeline: SoakTimeline, counters: SoakCounters) {
    let filler = "\(path)/filler"
    // O_CLOEXEC: a proxy restarted during the fill inherited the descriptor without it, and kept the deleted
    // filler, and the disk full, for as long as it lived (the sampler now reports such a descriptor).
    let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return }
    let block = [UInt8](repeating: 0, count: 1 << 20)
    var written = 0
    func top() {
      while true {
        let count = block.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
        if count <= 0 { return }
        written += count
      }
    }
    // The window opens before the first fill: the disk is full from the moment it fills, and on a loaded
    // machine filling took seconds, whose ENOSPC answers CI counted as unexplained.
    let window = timeline.begin(.diskFull)
    top()
    let end = monotonicSeconds() + seconds
    while monotonicSeconds() < end {
      sleepSeconds(0.05)
      top()
    }
    close(fd)
    unlink(filler)
    timeline.end(window)
    counters.add(SoakTimeline.Kind.diskFull.rawValue)
    counters.add("disk-full filler MiB", written >> 20)
  }

  func unmount() { if isSmall { _ = try? runQuiet("/bin/umount", [path]) } }
}

/// Runs a program to its end with its output discarded; returns its exit status.
func runQuiet(_ program: String, _ arguments: [String]) throws -> Int32 {
  let child = try Child(program, arguments, stdout: "/dev/null", stderr: "/dev/null")
  if case .exited(let status) = child.wait(timeout: 60) { return status }
  return -1
}
