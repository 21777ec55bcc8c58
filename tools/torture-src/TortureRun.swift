// mediacache-torture: crash, fault and abuse trials against the real binaries (run it through tools/torture).
//
//   mediacache-torture --bin DIR --work DIR [--trials N] [--minutes M] [--seed S] [--classes A,B,...]
//                      [--only-trial K] [--json FILE] [--parallel P] [--journal FILE]
//
// The trials are interleaved across the classes and run P at a time, each in its own directory with a seed of
// its own (from the run seed, its class and its number, so order and parallelism do not change a trial). With
// --journal each finished trial is appended to FILE as it ends, and a later run with the same FILE skips them:
// a run of thousands of trials stopped for any reason continues where it stopped (Journal.swift).
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
import Synchronization

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
  var parallel = 1
  var journal: String?
  /// Whether `seed` was given (a journal otherwise supplies it).
  var seedGiven = false
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

/// One trial to run: its class and number.
struct TrialItem: Sendable {
  let name: String
  let trial: Int
}

/// The trials of a run, interleaved across the classes (trial 0 of each class, then trial 1, …), so that a long
/// run stopped early has figures for every class. The many-processes run, one item, comes last.
func trialItems(_ options: Options) -> [TrialItem] {
  let numbers = options.onlyTrial.map { [$0] } ?? Array(0..<options.trials)
  var items = numbers.flatMap { trial in
    options.classes.filter { $0 != "many-processes" }.map { TrialItem(name: $0, trial: trial) }
  }
  if options.classes.contains("many-processes"), options.minutes > 0 {
    items.append(TrialItem(name: "many-processes", trial: 0))
  }
  return items
}

/// Runs one trial in its own directory with its own tally and returns its figures. The directory is removed
/// when the trial passed and kept for inspection when it failed.
func runTrial(_ item: TrialItem, options: Options, environment: Environment) -> TrialRecord {
  let tally = ClassTally(name: item.name)
  let directory = "\(options.work)/\(item.name)/trial-\(item.trial)"
  // A trial interrupted by an earlier run of the same journal left its files: start it afresh.
  removeTree(directory)
  try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  let context = TrialContext(
    tally: tally, trial: item.trial, seed: SeededRandom.trialSeed(options.seed, item.name, item.trial),
    directory: directory, runSeed: options.seed)
  let started = monotonicSeconds()
  switch item.name {
  case "fetch-kill": fetchKillTrial(context, environment)
  case "compactor-kill": compactorKillTrial(context, environment)
  case "fsck-kill": fsckKillTrial(context, environment)
  case "proxy-kill": proxyKillTrial(context, environment)
  case "hostile-peers": hostilePeersTrial(context, environment)
  default: manyProcessesRun(context, environment, minutes: options.minutes)
  }
  let failures = tally.failures
  if failures.isEmpty { removeTree(directory) }
  return TrialRecord(
    class: item.name, trial: item.trial, faults: tally.faults, bytesVerified: tally.bytesVerified,
    failures: failures, seconds: monotonicSeconds() - started, counters: tally.counters)
}

/// Runs `items` on `options.parallel` threads, skipping those the journal holds, and returns every record
/// (the journal's and the new ones). Each new record is appended to the journal as its trial ends.
func runTrials(
  _ items: [TrialItem], options: Options, environment: Environment, journal: Journal?
) -> [TrialRecord] {
  let earlier = items.compactMap { journal?.finished[$0.name]?[$0.trial] }
  let pending = items.filter { journal?.finished[$0.name]?[$0.trial] == nil }
  if !earlier.isEmpty {
    log(
      "# resuming: \(earlier.count) of \(items.count) trials done by earlier runs (journal \(journal!.path))")
  }
  for record in earlier {
    for failure in record.failures { log("FAIL [\(record.class)] (earlier run) \(failure)") }
  }
  struct Progress {
    var next = 0
    var done = 0
    var failed = 0
    var records: [TrialRecord] = []
  }
  let progress = Mutex(Progress())
  let started = monotonicSeconds()
  let finished = DispatchGroup()
  for _ in 0..<max(1, min(options.parallel, pending.count)) {
    finished.enter()
    Thread.detachNewThread {
      defer { finished.leave() }
      while let item = progress.withLock({ state -> TrialItem? in
        guard state.next < pending.count else { return nil }
        state.next += 1
        return pending[state.next - 1]
      }) {
        let record = runTrial(item, options: options, environment: environment)
        journal?.append(record)
        let (done, failed) = progress.withLock { state in
          state.records.append(record)
          state.done += 1
          if !record.failures.isEmpty { state.failed += 1 }
          return (state.done, state.failed)
        }
        let left = (monotonicSeconds() - started) / Double(done) * Double(pending.count - done) / 60
        log(
          String(
            format: "[%@] trial %d: %@ in %.1f s (%d/%d, %d failed, about %.0f min left)", item.name,
            item.trial, record.failures.isEmpty ? "ok" : "FAILED", record.seconds, earlier.count + done,
            items.count, failed, left))
      }
    }
  }
  finished.wait()
  return earlier + progress.withLock { $0.records }
}

/// The figures of one class from its trials' records.
func classSummary(_ name: String, _ records: [TrialRecord]) -> ClassSummary {
  var summary = ClassSummary(
    name: name, trials: 0, faults: 0, bytesVerified: 0, failures: [], seconds: 0, counters: [:])
  for record in records.sorted(by: { $0.trial < $1.trial }) where record.class == name {
    if name != "many-processes" { summary.trials += 1 }
    summary.faults += record.faults
    summary.bytesVerified += record.bytesVerified
    summary.failures += record.failures
    summary.seconds += record.seconds
    summary.counters.merge(record.counters, uniquingKeysWith: +)
  }
  return summary
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
  var options = options
  var journal: Journal?
  if let path = options.journal {
    do {
      journal = try Journal(path: path, seed: options.seedGiven ? options.seed : nil)
      options.seed = journal!.seed
    } catch {
      log("mediacache-torture: \(error)")
      try? await origin.shutdown()
      return 2
    }
  }
  let environment = Environment(binaries: Binaries(directory: options.binaries), origin: origin)
  let machine = machineDescription()
  say(
    "# mediacache-torture: seed \(options.seed), trials \(options.trials), minutes \(options.minutes), "
      + "parallel \(options.parallel)" + (options.journal.map { ", journal \($0)" } ?? ""))
  say("# machine: \(machine)")
  let started = monotonicSeconds()
  let records = await withCheckedContinuation { [options, journal] continuation in
    Thread.detachNewThread {
      continuation.resume(
        returning: runTrials(
          trialItems(options), options: options, environment: environment, journal: journal))
    }
  }
  let summaries = options.classes.map { classSummary($0, records) }
  for summary in summaries { say(summary.line) }
  try? await origin.shutdown()
  let failures = summaries.reduce(0) { $0 + $1.failures.count }
  say(String(format: "# total: %d failure(s) in %.1f s", failures, monotonicSeconds() - started))
  if let path = options.json {
    let object: [String: Any] = [
      "seed": options.seed, "trials": options.trials, "minutes": options.minutes, "machine": machine,
      "parallel": options.parallel,
      "classes": summaries.map(\.json), "failures": failures,
    ]
    if let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
    {
      _ = FileManager.default.createFile(atPath: path, contents: data)
    }
  }
  return failures == 0 ? 0 : 1
}
