// `mediacache-bench make-tree` and `compactor-pass`: the cost of a compaction pass over a large tree, against
// `find DIR -type f -printf '%T@ %s\n'` over the same tree in the same run.

import ArgumentParser
import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Creates `--objects N` small complete objects (two 4 KiB chunks each) with recency stamps spread over 100 days.
struct MakeTreeCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "make-tree",
    abstract: "Create N small objects (default 100000) with recency stamps spread over 100 days.")

  @Option var cache: String
  @Option var objects: Positive = 100000

  func run() throws {
    try makeTree(
      root: cache, count: objects.value)
  }
}

func makeTree(root: String, count: Int) throws {
  let store = try ShardedStore(root: root, chunkSize: 4096, durability: .relaxed)
  var random = XorShift(state: 0x9E37_79B9_7F4A_7C15)
  var payload = [UInt8](repeating: 0, count: 8192)
  let now = Date().timeIntervalSince1970
  let (_, elapsed) = try timed {
    for index in 0..<count {
      payload.withUnsafeMutableBytes { random.fill($0) }
      let id = CacheKey("https://bench.example/object/\(index)").objectID
      let manager = try FileHandleAssetDataManager(store: store, id: id)
      try manager.setContentLength(Int64(payload.count))
      try payload.withUnsafeBytes { try manager.write($0, at: 0) }
      try manager.close()
      let age = Double(random.next() % (100 * 86400))
      var times = [
        timespec(tv_sec: Int(now - age), tv_nsec: 0), timespec(tv_sec: Int(now - age), tv_nsec: 0),
      ]
      _ = utimensat(AT_FDCWD, store.paths(for: id).manifest, &times, 0)
    }
  }
  print("created \(count) objects under \(root) in \(fixed(elapsed, 1)) s")
}

/// Times `find` and compaction passes over an existing tree, alternating, and reports medians and peak RSS.
struct CompactorPassCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "compactor-pass",
    abstract: "Time find and compaction passes over a tree.",
    discussion: """
      Times `find DIR/objects -type f -printf '%T@ %s\\n'` and compaction passes (no eviction; dry run down to \
      half the size) over the tree, alternating, R rounds (default 5); reports medians and peak RSS.
      """)

  @Option var cache: String
  @Option var rounds: Positive = 5
  @Flag var json = false

  func run() throws {
    let root = cache
    let rounds = rounds.value
    let json = json
    guard let find = findExecutable("find") else { throw BenchError("find is not on PATH") }
    let store = try ShardedStore(root: root, chunkSize: 4096, create: false)
    let before = MemorySnapshot.now()

    func runFind() throws -> Double {
      try timeCommand(find, ["\(root)/objects", "-type", "f", "-printf", "%T@ %s\n"])
    }

    _ = try runFind()  // warm the dentry and inode caches for both sides
    let objects = try store.scanObjects()
    let total = objects.reduce(0) { $0 + $1.diskBytes }
    // No eviction: the pass lists, stats and orders every object. Dry run at half the size: it also parses
    // the manifest of every candidate and probes its lock.
    let scanOnly = Compactor(store: store, policy: CompactionPolicy(maxSize: total + 1, maxAge: nil))
    let halfDry = Compactor(
      store: store, policy: CompactionPolicy(maxSize: total / 2, lowWatermark: 1, maxAge: nil, dryRun: true))
    var findTimes: [Double] = []
    var scanTimes: [Double] = []
    var dryTimes: [Double] = []
    var candidates = 0
    for _ in 0..<rounds {
      findTimes.append(try runFind())
      scanTimes.append(try timed { try scanOnly.runPass() }.seconds)
      let (report, elapsed) = try timed { try halfDry.runPass() }
      dryTimes.append(elapsed)
      candidates = report.evictedCount
    }
    let after = MemorySnapshot.now()
    let findMedian = median(findTimes)
    let scanMedian = median(scanTimes)
    let dryMedian = median(dryTimes)

    var report = Report()
    report.line("tree: \(objects.count) objects, \(total) bytes on disk, \(rounds) rounds (medians)")
    report.line("find -type f -printf '%T@ %s\\n':  \(fixed(findMedian * 1000, 1)) ms")
    report.line(
      "compaction pass, no eviction:     \(fixed(scanMedian * 1000, 1)) ms  = \(fixed(scanMedian / findMedian, 2))x find"
    )
    report.line(
      "dry-run pass, evicting to 50%:    \(fixed(dryMedian * 1000, 1)) ms  = \(fixed(dryMedian / findMedian, 2))x find"
        + " (\(candidates) candidates parsed and lock-probed)")
    report.line("peak RSS: before \(before.text); after \(after.text)")
    report.set("objects", .integer(Int64(objects.count)))
    report.set("find_ms", .number(findMedian * 1000))
    report.set("pass_ms", .number(scanMedian * 1000))
    report.set("dry_run_half_ms", .number(dryMedian * 1000))
    report.set("pass_vs_find", .number(scanMedian / findMedian))
    report.set("dry_run_half_vs_find", .number(dryMedian / findMedian))
    report.set("memory_before", before.json)
    report.set("memory_after", after.json)
    report.emit(json: json)
  }
}

/// Runs a command with its output discarded and returns the seconds it took; throws if it fails.
func timeCommand(_ program: String, _ arguments: [String]) throws -> Double {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: program)
  process.arguments = arguments
  process.standardOutput = FileHandle.nullDevice
  let (_, elapsed) = try timed {
    try process.run()
    process.waitUntilExit()
  }
  guard process.terminationStatus == 0 else {
    throw BenchError("\(program) exited \(process.terminationStatus)")
  }
  return elapsed
}
