import Foundation
import Synchronization

/// One sample of the proxy process.
struct SoakSample: Codable {
  /// Seconds since the soak began.
  var time: Double
  /// Which proxy process (0: the first; each restart adds one) and how long it had run.
  var lifetime: Int
  var age: Double
  var rssMiB: Double
  /// Open descriptors other than sockets (files, pipes, event descriptors): what a leak of the cache's
  /// files shows in. Sockets follow the players' connections.
  var fds: Int
  var sockets: Int
  var threads: Int
  /// How long the proxy took to answer a request it answers itself (a 400 for a target without a URL): the
  /// event loops' lag, and the I/O threads' when they are the ones behind (nil: no answer in 2 s).
  var probeMilliseconds: Double?
}

/// The running proxy, which the kill loop replaces and the sampler and players look at.
final class ProxyHolder: Sendable {
  private let state = Mutex<(process: ProxyProcess?, lifetime: Int, started: Double)>((nil, -1, 0))

  func set(_ process: ProxyProcess) {
    state.withLock { $0 = (process, $0.lifetime + 1, monotonicSeconds()) }
  }
  var current: (process: ProxyProcess?, lifetime: Int, started: Double) { state.withLock { $0 } }
}

/// Samples the proxy every second until `stop`: RSS, open descriptors and threads from /proc, and the probe.
/// A descriptor of the proxy's on a file under `fileSystem` but outside `cache` is a problem (once a path): the
/// proxy opens only the cache's files there, so it is one the harness leaked into it (the disk filler was, when
/// the proxy restarted during the fill, and kept the disk full for as long as that proxy lived).
func sampleProxy(
  _ holder: ProxyHolder, port: Int, began: Double, stop: StopFlag, into samples: Shared<[SoakSample]>,
  fileSystem: String, cache: String, tally: SoakTally
) {
  var reported: Set<String> = []
  while !stop.isSet {
    let (process, lifetime, started) = holder.current
    if let process, process.child.isRunning,
      let status = try? String(contentsOfFile: "/proc/\(process.child.pid)/status", encoding: .utf8)
    {
      func field(_ name: String) -> Double? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("\(name):") }) else {
          return nil
        }
        return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap {
          Double($0)
        }
      }
      let descriptors =
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.child.pid)/fd")) ?? []
      let targets = descriptors.compactMap {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(process.child.pid)/fd/\($0)")
      }
      let sockets = targets.filter { $0.hasPrefix("socket:") }.count
      for target in targets
      where target.hasPrefix(fileSystem + "/") && !target.hasPrefix(cache + "/") {
        let path = target.hasSuffix(" (deleted)") ? String(target.dropLast(10)) : target
        guard reported.insert(path).inserted else { continue }
        tally.problem("the proxy (pid \(process.child.pid)) holds \(target) open, a file outside its cache")
      }
      let probe = soakGet(port: port, SoakRequest(target: "/soak-probe"), receiveTimeout: 2)
      let probeMilliseconds = probe.status == nil ? nil : (probe.ended - probe.started) * 1000
      let sample = SoakSample(
        time: monotonicSeconds() - began, lifetime: lifetime, age: monotonicSeconds() - started,
        rssMiB: (field("VmRSS") ?? 0) / 1024, fds: descriptors.count - sockets, sockets: sockets,
        threads: Int(field("Threads") ?? 0),
        probeMilliseconds: probeMilliseconds)
      samples.update { $0.append(sample) }
    }
    sleepSeconds(1)
  }
}

/// Whether the samples show growth over the run: the medians of the last third (of samples at least 10 s into
/// their process's life) against the first third's. Returns the figures and any trend found.
func trendOf(_ samples: [SoakSample]) -> (first: SoakSample?, last: SoakSample?, problems: [String]) {
  let settled = samples.filter { $0.age >= 10 }
  guard settled.count >= 6 else { return (nil, nil, []) }
  let third = settled.count / 3
  func median(_ part: ArraySlice<SoakSample>) -> SoakSample {
    func middle<T: Comparable>(_ values: [T]) -> T { values.sorted()[values.count / 2] }
    return SoakSample(
      time: middle(part.map(\.time)), lifetime: 0, age: middle(part.map(\.age)),
      rssMiB: middle(part.map(\.rssMiB)),
      fds: middle(part.map(\.fds)), sockets: middle(part.map(\.sockets)),
      threads: middle(part.map(\.threads)), probeMilliseconds: nil)
  }
  let first = median(settled.prefix(third))
  let last = median(settled.suffix(third))
  var problems: [String] = []
  if last.rssMiB > first.rssMiB * 1.5 + 16 {
    problems.append(
      "RSS grew: median \(Int(first.rssMiB)) MiB in the first third, \(Int(last.rssMiB)) in the last")
  }
  if last.fds > first.fds + 32 {
    problems.append("open descriptors other than sockets grew: \(first.fds) → \(last.fds)")
  }
  if last.threads > first.threads + 8 { problems.append("threads grew: \(first.threads) → \(last.threads)") }
  return (first, last, problems)
}
