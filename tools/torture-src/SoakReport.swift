import Foundation
import MediaCacheTestOrigin

/// What a soak found: the table it prints and the JSON it writes (`--json`).
struct SoakReport: Codable {
  /// A fault of the timeline, in seconds since the epoch.
  struct Fault: Codable {
    var kind: String
    var start: Double
    var end: Double
    var object: String?
  }

  var seed: UInt64
  var minutes: Double
  var players: Int
  var seconds = 0.0
  var fileSystem: String
  var httpsOrigin: String
  /// The proxy's log lines of origin TLS failures (`TLS:`), from every run of the proxy.
  var tlsFailuresLogged = 0
  var maxSizeBytes = SoakSizes.maxSize
  var workingSetBytes: Int
  var objects: Int
  var pinned: [String]
  var requests: [String: Int64] = [:]
  var requestsTotal: Int64 = 0
  var complete: Int64 = 0
  var abandoned: Int64 = 0
  var bytesVerified: Int64 = 0
  var wrongBytes: Int64 = 0
  /// Failed requests by `<fault>: <how they failed>`.
  var failuresExplained: [String: Int64] = [:]
  var failuresUnexplained: Int64 = 0
  /// Kills, restarts and faults by kind.
  var counters: [String: Int] = [:]
  var compactorPasses = 0
  var evictions = 0
  var chunksScrubbed = 0
  var chunksDroppedByScrub = 0
  var fsckLive: [String] = []
  var fsckFinal: [String] = []
  var chunksAudited = 0
  var bytesAudited: Int64 = 0
  var pinnedIntact = false
  var hitsDuringFaults = 0
  var hitP99DuringFaultsMilliseconds: Double?
  var hitsQuiet = 0
  var hitP99QuietMilliseconds: Double?
  /// Time to the response head, p99, of requests that overlapped a fault window and of the others.
  var headP99DuringFaultsMilliseconds: Double?
  var headP99QuietMilliseconds: Double?
  var peakRSSMiB = 0.0
  var finalRSSMiB = 0.0
  var peakFDs = 0
  var finalFDs = 0
  var peakSockets = 0
  var finalSockets = 0
  var peakThreads = 0
  var finalThreads = 0
  var probeP99Milliseconds: Double?
  var samples: [SoakSample] = []
  var timeline: [Fault] = []
  var problems: [String] = []
  var passed = false

  init(options: SoakOptions, workingSet: SoakWorkingSet, fileSystem: SoakFileSystem, httpsOrigin: String) {
    self.httpsOrigin = httpsOrigin
    seed = options.seed
    minutes = options.minutes
    players = options.players
    self.fileSystem = fileSystem.note
    workingSetBytes = workingSet.bytes
    objects = workingSet.all.count
    pinned = workingSet.pinned.map(\.name)
  }

  /// Audits every object still cached: each chunk its manifest lists matches its CRC and the origin's bytes
  /// (the changed object's in either version, never a mix); the pinned objects are still whole and pinned.
  mutating func audit(root: String, set: SoakWorkingSet, origin: TestOrigin, tally: SoakTally) {
    pinnedIntact = true
    for object in set.all {
      let versions = object.name == set.changed.name ? [origin.version(of: object.name), 0] : [0]
      var audits: [ObjectAudit] = []
      for version in versions {
        let audit = auditObject(
          root: root, OriginObject(name: object.name, size: object.size, url: object.url, version: version))
        audits.append(audit)
        if audit.problems.isEmpty && audit.badChunks.isEmpty { break }
      }
      let audit = audits.last!
      if audit.manifest == nil, let error = audit.manifestError {
        tally.problem("after the run: \(object.name): \(error)")
      }
      for problem in audit.problems { tally.problem("after the run: \(problem)") }
      if !audit.badChunks.isEmpty {
        tally.problem("after the run: \(object.name): chunks \(audit.badChunks.sorted()) fail their CRC")
      }
      chunksAudited += audit.goodChunks.count
      bytesAudited += audit.bytesVerified
      if set.pinned.contains(where: { $0.name == object.name }),
        audit.manifest?.isComplete != true || audit.manifest?.isPinned != true
      {
        pinnedIntact = false
        tally.problem("after the run: the pinned object \(object.name) is no longer whole and pinned")
      }
    }
  }

  /// Sums the compactor's pass reports (one JSON object per line).
  mutating func compactor(output: String) {
    for line in output.split(separator: "\n") {
      guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
        continue
      }
      compactorPasses += 1
      evictions += object["evictedCount"] as? Int ?? 0
      chunksScrubbed += object["chunksScrubbed"] as? Int ?? 0
      chunksDroppedByScrub += object["chunksDropped"] as? Int ?? 0
    }
  }

  /// The proxies' access log lines of cache hits (`cache=hit`), split into those that overlapped a fault and
  /// the others; the p99 of their durations.
  mutating func accessLog(directory: String, timeline: SoakTimeline) {
    let parser = ISO8601DateFormatter()
    parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    var faulted: [Double] = []
    var quiet: [Double] = []
    let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    for file in files where file.hasSuffix("-proxy.err") {
      guard let text = try? String(contentsOfFile: "\(directory)/\(file)", encoding: .utf8) else { continue }
      tlsFailuresLogged += text.split(separator: "\n").count { $0.contains("TLS:") }
      for line in text.split(separator: "\n") where line.contains(" cache=hit") {
        var fields: [Substring: Substring] = [:]
        for item in line.split(separator: " ") {
          guard let equals = item.firstIndex(of: "=") else { continue }
          fields[item[..<equals]] = item[item.index(after: equals)...]
        }
        guard let time = fields["time"].flatMap({ parser.date(from: String($0)) })?.timeIntervalSince1970,
          let milliseconds = fields["duration_ms"].flatMap({ Double($0) }),
          let bytes = fields["bytes"].flatMap({ Int($0) }), bytes <= 2 << 20
        else { continue }
        if timeline.isFaulted(from: time - milliseconds / 1000, to: time, grace: 0) {
          faulted.append(milliseconds)
        } else {
          quiet.append(milliseconds)
        }
      }
    }
    hitsDuringFaults = faulted.count
    hitP99DuringFaultsMilliseconds = percentile(faulted, 0.99)
    hitsQuiet = quiet.count
    hitP99QuietMilliseconds = percentile(quiet, 0.99)
  }

  /// Fills in the players' figures and the samples', prints the table, writes the JSON, keeps the cache of a
  /// failed run, unmounts, and returns the exit status.
  mutating func finish(
    tally: SoakTally, options: SoakOptions, fileSystem: SoakFileSystem, root: String, work: String
  ) -> Int32 {
    let seen = tally.snapshot
    let windows = tally.timeline
    requests = seen.requests
    requestsTotal = seen.requests.values.reduce(0, +)
    complete = seen.complete
    abandoned = seen.abandoned
    bytesVerified = seen.bytesVerified
    wrongBytes = seen.wrongBytes
    failuresExplained = seen.explained
    failuresUnexplained = seen.unexplained
    let faulted = seen.headTimes.filter {
      windows.isFaulted(from: $0.start, to: $0.start + $0.seconds, grace: 0)
    }
    let quiet = seen.headTimes.filter {
      !windows.isFaulted(from: $0.start, to: $0.start + $0.seconds, grace: 0)
    }
    headP99DuringFaultsMilliseconds = percentile(faulted.map { $0.seconds * 1000 }, 0.99)
    headP99QuietMilliseconds = percentile(quiet.map { $0.seconds * 1000 }, 0.99)
    if let last = samples.last {
      finalRSSMiB = last.rssMiB
      finalFDs = last.fds
      finalThreads = last.threads
      finalSockets = last.sockets
    }
    peakRSSMiB = samples.map(\.rssMiB).max() ?? 0
    peakFDs = samples.map(\.fds).max() ?? 0
    peakThreads = samples.map(\.threads).max() ?? 0
    peakSockets = samples.map(\.sockets).max() ?? 0
    probeP99Milliseconds = percentile(samples.compactMap(\.probeMilliseconds), 0.99)
    let trend = trendOf(samples)
    problems = seen.problems + trend.problems
    if requestsTotal == 0 { problems.append("no request was made") }
    passed = problems.isEmpty && wrongBytes == 0 && failuresUnexplained == 0
    for problem in problems { log("SOAK FAIL \(problem)") }
    print(table(trend: trend))
    if let json = options.json {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
      if let data = try? encoder.encode(self) { try? data.write(to: URL(fileURLWithPath: json)) }
    }
    if !passed {
      _ = try? runQuiet("/bin/cp", ["-a", root, "\(work)/cache-kept"])
      log(
        "# the cache of the failed run is kept in \(work)/cache-kept; replay: tools/soak --minutes \(minutes) --seed \(seed)"
      )
    }
    fileSystem.unmount()
    return passed ? 0 : 1
  }

  private func table(trend: (first: SoakSample?, last: SoakSample?, problems: [String])) -> String {
    func milliseconds(_ value: Double?) -> String { value.map { String(format: "%.1f ms", $0) } ?? "-" }
    func sorted(_ values: [String: Int64]) -> String {
      values.isEmpty
        ? "none" : values.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
    var rows: [(String, String)] = [
      (
        "run",
        String(format: "%.0f s, %d players, seed %llu, cache on %@", seconds, players, seed, fileSystem)
      ),
      (
        "working set",
        "\(objects) objects, \(workingSetBytes >> 20) MiB against --max-size \(maxSizeBytes >> 20) MiB"
      ),
      (
        "requests",
        "\(requestsTotal) (\(sorted(requests))); \(complete) complete, \(abandoned) abandoned by the player"
      ),
      (
        "HTTPS origin",
        "\(httpsOrigin); \(tlsFailuresLogged) origin TLS failures in the proxy's log"
      ),
      ("bytes verified", "\(bytesVerified) (\(bytesVerified >> 20) MiB)"),
      ("wrong bytes", "\(wrongBytes)"),
      ("failed requests, explained", sorted(failuresExplained)),
      ("failed requests, unexplained", "\(failuresUnexplained)"),
      ("faults", counters.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")),
      (
        "compactor",
        "\(compactorPasses) passes, \(evictions) evictions, \(chunksScrubbed) chunks scrubbed, \(chunksDroppedByScrub) dropped"
      ),
      (
        "cache-fsck -n while live",
        Dictionary(grouping: fsckLive, by: { $0 }).map { "\($0.key) ×\($0.value.count)" }.sorted().joined(
          separator: "; ")
      ),
      ("cache-fsck -n after", fsckFinal.joined(separator: "; ")),
      (
        "audit after",
        "\(chunksAudited) chunks (\(bytesAudited >> 20) MiB) match their CRC and the origin; pinned intact: \(pinnedIntact)"
      ),
      (
        "time to response head, p99",
        "during faults \(milliseconds(headP99DuringFaultsMilliseconds)), quiet \(milliseconds(headP99QuietMilliseconds))"
      ),
      (
        "cache hits (proxy's duration)",
        "during faults \(hitsDuringFaults), p99 \(milliseconds(hitP99DuringFaultsMilliseconds)); quiet \(hitsQuiet), p99 \(milliseconds(hitP99QuietMilliseconds)); ranges of at most 2 MiB, head to last byte"
      ),
      ("proxy RSS", String(format: "peak %.1f MiB, final %.1f MiB", peakRSSMiB, finalRSSMiB)),
      (
        "proxy fds / sockets / threads",
        "peak \(peakFDs) / \(peakSockets) / \(peakThreads), final \(finalFDs) / \(finalSockets) / \(finalThreads)"
      ),
      ("probe (event-loop lag)", "p99 \(milliseconds(probeP99Milliseconds)) over \(samples.count) samples"),
    ]
    if let first = trend.first, let last = trend.last {
      rows.append(
        (
          "trend (first → last third)",
          String(
            format: "RSS %.1f → %.1f MiB, fds %d → %d, threads %d → %d", first.rssMiB, last.rssMiB, first.fds,
            last.fds, first.threads, last.threads)
        ))
    }
    rows.append(("result", passed ? "pass" : "FAIL (\(problems.count) problems; see standard error)"))
    let width = rows.map(\.0.count).max() ?? 0
    return rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(
      separator: "\n")
  }
}

/// The `fraction` percentile of `values` (nil when empty).
func percentile(_ values: [Double], _ fraction: Double) -> Double? {
  guard !values.isEmpty else { return nil }
  let sorted = values.sorted()
  return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}
