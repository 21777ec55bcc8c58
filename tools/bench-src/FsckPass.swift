// `mediacache-bench make-big-tree` and `fsck-pass`: the checker's metadata pass against `find`, and its full
// CRC verification against `cat` of every data file and zlib's CRC speed, in the same run.

import ArgumentParser
import Foundation
import MediaCache

/// Creates `--objects N` complete objects of `--size-mib M` MiB each (1 MiB chunks).
struct MakeBigTreeCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "make-big-tree",
    abstract: "Create N objects (default 16) of M MiB (default 128) with 1 MiB chunks.")

  @Option var cache: String
  @Option var objects: Positive = 16
  @Option var sizeMib: Positive = 128

  func run() throws {
    let root = cache
    let count = objects.value
    let sizeMiB = sizeMib.value
    let store = try ShardedStore(root: root, chunkSize: 1 << 20, durability: .relaxed)
    var random = XorShift(state: 0xD1B5_4A32_D192_ED03)
    let piece = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
    defer { piece.deallocate() }
    let (_, elapsed) = try timed {
      for index in 0..<count {
        let manager = try FileHandleAssetDataManager(
          store: store, id: CacheKey("https://bench.example/big/\(index)").objectID)
        try manager.setContentLength(Int64(sizeMiB) << 20)
        for offset in 0..<sizeMiB {
          random.fill(piece)
          try manager.write(UnsafeRawBufferPointer(piece), at: Int64(offset) << 20)
        }
        try manager.close()
      }
    }
    print("created \(count) objects of \(sizeMiB) MiB under \(root) in \(fixed(elapsed, 1)) s")
  }
}

/// zlib CRC-32 speed over a warm 64 MiB buffer, MiB/s (median of 5).
func crcSpeed() -> Double {
  let size = 64 << 20
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
  defer { buffer.deallocate() }
  var random = XorShift(state: 42)
  random.fill(buffer)
  var sink: UInt32 = 0
  var speeds: [Double] = []
  for _ in 0..<5 {
    let (crc, elapsed) = timed { CRC32.checksum(UnsafeRawBufferPointer(buffer)) }
    sink ^= crc
    speeds.append(mibPerSecond(Int64(size), elapsed))
  }
  if sink == 0x1234_5678 { print("") }  // keep the work observable
  return median(speeds)
}

/// Times `find`, `cache-fsck --fast` and full verification (in-process `CacheChecker`) and `cat` of every
/// data file, alternating rounds, and reports medians and ratios.
struct FsckPassCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "fsck-pass",
    abstract: "Time find, the checker's --fast pass, cat and full CRC verification over a tree.",
    discussion: """
      Times find, the checker's --fast pass, `cat` of every data file and full CRC verification over the tree, \
      alternating, R rounds (default 3), plus zlib's CRC speed; reports medians and ratios.
      """)

  @Option var cache: String
  @Option var rounds: Positive = 3
  @Flag var json = false

  func run() throws {
    let root = cache
    let rounds = rounds.value
    let json = json
    guard let find = findExecutable("find") else { throw BenchError("find is not on PATH") }
    guard let shell = findExecutable("sh") else { throw BenchError("sh is not on PATH") }
    let findArguments = ["\(root)/objects", "-type", "f", "-printf", "%T@ %s\n"]
    let catScript = "find '\(root)/objects' -name '*.data' -exec cat {} + > /dev/null"
    _ = try timeCommand(find, findArguments)  // warm metadata caches
    _ = try timeCommand(shell, ["-c", catScript])  // warm the page cache for both readers

    var findTimes: [Double] = []
    var fastTimes: [Double] = []
    var fullTimes: [Double] = []
    var catTimes: [Double] = []
    var verified: Int64 = 0
    var objects = 0
    var findings = 0
    for _ in 0..<rounds {
      findTimes.append(try timeCommand(find, findArguments))
      let fast = try timed { try CacheChecker(root: FilePath(root), options: .init(fast: true)).run() }
      fastTimes.append(fast.seconds)
      catTimes.append(try timeCommand(shell, ["-c", catScript]))
      let full = try timed { try CacheChecker(root: FilePath(root)).run() }
      fullTimes.append(full.seconds)
      verified = full.result.totals.bytesVerified
      objects = full.result.totals.objects
      findings = full.result.findings.count + fast.result.findings.count
    }
    let crc = crcSpeed()
    let fullSpeed = mibPerSecond(verified, median(fullTimes))
    let catSpeed = mibPerSecond(verified, median(catTimes))
    let slower = min(crc, catSpeed)

    var report = Report()
    report.line(
      "tree: \(objects) objects, \(verified) bytes of chunks, \(rounds) rounds (medians); findings \(findings)"
    )
    report.line("find -type f -printf:        \(fixed(median(findTimes) * 1000, 1)) ms")
    report.line(
      "fsck --fast:                 \(fixed(median(fastTimes) * 1000, 1)) ms = \(fixed(median(fastTimes) / median(findTimes), 2))x find"
    )
    report.line("cat of every data file:      \(fixed(catSpeed, 0)) MiB/s")
    report.line("crc32 (warm buffer, folded): \(fixed(crc, 0)) MiB/s")
    report.line(
      "fsck full verification:      \(fixed(fullSpeed, 0)) MiB/s = \(fixed(fullSpeed / slower * 100, 0))% of the slower baseline"
    )
    report.set("objects", .integer(Int64(objects)))
    report.set("find_ms", .number(median(findTimes) * 1000))
    report.set("fast_ms", .number(median(fastTimes) * 1000))
    report.set("fast_vs_find", .number(median(fastTimes) / median(findTimes)))
    report.set("cat_mib_s", .number(catSpeed))
    report.set("crc_mib_s", .number(crc))
    report.set("full_mib_s", .number(fullSpeed))
    report.set("full_vs_slower_baseline", .number(fullSpeed / slower))
    report.emit(json: json)
  }
}
