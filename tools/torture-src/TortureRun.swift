// mediacache-torture: crash, fault and abuse trials against the real binaries (run it through tools/torture).
//
//   mediacache-torture --bin DIR --work DIR [--trials N] [--minutes M] [--seed S] [--classes A,B,...]
//                      [--only-trial K] [--json FILE]
//
// Classes (all by default, in this order):
//   fetch-kill       SIGKILL `mediacache fetch` at random points of a download (1-3 times), then restart it
//   compactor-kill   SIGKILL `cache-compactor` during a pass (age and size eviction, tmp reaping, scrubbing of
//                    chunks corrupted on purpose), then restart it
//   fsck-kill        SIGKILL `cache-fsck --repair` on a tree with every kind of damage it repairs, then restart it
//   proxy-kill       SIGKILL `mediacache proxy` under three clients reading overlapping ranges, then restart it
//   hostile-peers    hostile origins (silent, endless headers, lying lengths, overlong bodies, wrong ranges,
//                    redirect loops) and hostile clients (malformed, enormous or thousands of Range headers,
//                    enormous heads, connection floods) against one proxy, beside a normal client
//   many-processes   M minutes of four workers running mediacache commands and proxy GETs on overlapping
//                    objects, beside cache-compactor (tiny --max-size, scrubbing) and cache-fsck -n in a loop
//
// After every fault: every chunk a manifest lists matches its CRC and the origin's bytes (read straight from the
// data file), `mediacache cat` prints the origin's bytes, `cache-fsck -n` reports nothing but what a repair
// fixes, and the restart finishes the work; at the end of each trial every file of the cache is scanned for the
// URLs and names used (none may appear) and must be mode 0600 (directories 0700).
//
// One summary line per class on standard output (and --json FILE); failures on standard error, each with the
// command that reproduces its trial. Exit status 0 when nothing failed, 1 otherwise, 2 on bad arguments.

import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What every trial needs.
struct Environment: Sendable {
  let binaries: Binaries
  let origin: TestOrigin
}

struct Options {
  var binaries = ""
  var work = ""
  var trials = 3
  var minutes = 0.5
  var seed = UInt64(UInt32.random(in: 1...UInt32.max))
  var classes = allClasses
  var onlyTrial: Int?
  var json: String?
}

let allClasses = [
  "fetch-kill", "compactor-kill", "fsck-kill", "proxy-kill", "hostile-peers", "many-processes",
]

/// One class's figures, for the summary and the JSON file.
struct ClassSummary {
  var name: String
  var trials: Int
  var faults: Int
  var bytesVerified: Int64
  var failures: [String]
  var seconds: Double
  var counters: [String: Int64]

  var line: String {
    let extra = counters.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    return String(
      format: "%-15@ trials %4d  faults %5d  bytes verified %13lld  failures %3d  %8.1f s  (%@)",
      name as NSString,
      trials, faults, bytesVerified, failures.count, seconds, extra as NSString)
  }

  var json: [String: Any] {
    [
      "class": name, "trials": trials, "faults": faults, "bytesVerified": bytesVerified,
      "failures": failures.count, "failureMessages": failures, "seconds": seconds, "counters": counters,
    ]
  }
}

func runClass(_ name: String, options: Options, environment: Environment) -> ClassSummary {
  let tally = ClassTally(name: name)
  let started = monotonicSeconds()
  let classDirectory = "\(options.work)/\(name)"
  let trials: [Int] =
    name == "many-processes"
    ? (options.minutes > 0 ? [0] : []) : options.onlyTrial.map { [$0] } ?? Array(0..<options.trials)
  for trial in trials {
    let directory = "\(classDirectory)/trial-\(trial)"
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let context = TrialContext(
      tally: tally, trial: trial, seed: SeededRandom.trialSeed(options.seed, name, trial),
      directory: directory,
      runSeed: options.seed)
    let failuresBefore = tally.failures.count
    let trialStarted = monotonicSeconds()
    switch name {
    case "fetch-kill": fetchKillTrial(context, environment)
    case "compactor-kill": compactorKillTrial(context, environment)
    case "fsck-kill": fsckKillTrial(context, environment)
    case "proxy-kill": proxyKillTrial(context, environment)
    case "hostile-peers": hostilePeersTrial(context, environment)
    default: manyProcessesRun(context, environment, minutes: options.minutes)
    }
    if name != "many-processes" { tally.trialDone() }
    let failed = tally.failures.count > failuresBefore
    log(
      String(
        format: "[%@] trial %d: %@ in %.1f s", name, trial, failed ? "FAILED" : "ok",
        monotonicSeconds() - trialStarted))
    // Keep the files of a failed trial for inspection.
    if !failed { removeTree(directory) }
  }
  return ClassSummary(
    name: name, trials: tally.trials, faults: tally.faults, bytesVerified: tally.bytesVerified,
    failures: tally.failures, seconds: monotonicSeconds() - started, counters: tally.counters)
}

func machineDescription() -> String {
  let cpu =
    (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n")
    .first { $0.hasPrefix("model name") }.map {
      $0.split(separator: ":", maxSplits: 1).last!.trimmingCharacters(in: .whitespaces)
    }
    ?? "unknown CPU"
  var name = utsname()
  uname(&name)
  let kernel = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
  return
    "\(ProcessInfo.processInfo.activeProcessorCount) CPUs (\(cpu)), \(ProcessInfo.processInfo.physicalMemory >> 30) GiB RAM, kernel \(kernel)"
}

/// A line on standard output, written at once (not buffered until exit when piped).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

@MainActor func runTorture(_ options: Options) async -> Int32 {
  signal(SIGPIPE, SIG_IGN)
  do {
    try Binaries(directory: options.binaries).check()
  } catch {
    log("mediacache-torture: \(error)")
    return 2
  }
  let origin: TestOrigin
  do {
    origin = try await TestOrigin.start()
  } catch {
    log("mediacache-torture: cannot start the test origin: \(error)")
    return 1
  }
  let environment = Environment(binaries: Binaries(directory: options.binaries), origin: origin)
  let machine = machineDescription()
  say("# mediacache-torture: seed \(options.seed), trials \(options.trials), minutes \(options.minutes)")
  say("# machine: \(machine)")
  var summaries: [ClassSummary] = []
  let started = monotonicSeconds()
  for name in options.classes {
    let summary = runClass(name, options: options, environment: environment)
    say(summary.line)
    summaries.append(summary)
  }
  try? await origin.shutdown()
  let failures = summaries.reduce(0) { $0 + $1.failures.count }
  say(String(format: "# total: %d failure(s) in %.1f s", failures, monotonicSeconds() - started))
  if let path = options.json {
    let object: [String: Any] = [
      "seed": options.seed, "trials": options.trials, "minutes": options.minutes, "machine": machine,
      "classes": summaries.map(\.json), "failures": failures,
    ]
    if let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
    {
      _ = FileManager.default.createFile(atPath: path, contents: data)
    }
  }
  return failures == 0 ? 0 : 1
}
