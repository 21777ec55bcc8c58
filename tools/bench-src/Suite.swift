// The benchmark suite behind `tools/bench`: cases measured against a baseline in the same run, rounds
// interleaved, each case one row of a table (see docs/PERFORMANCE.md).
//
//   mediacache-bench disk  --dir DIR --rows FILE [--size-mib N] [--rounds R] [--reads N]
//   mediacache-bench tree  --dir DIR --rows FILE --fsck PATH [--objects N] [--rounds R]
//   mediacache-bench row   --rows FILE --name NAME --unit UNIT --project V,V.. [--baseline V,V..
//                          --baseline-name NAME] --target OP,VALUE [--note TEXT]
//   mediacache-bench table --rows FILE [--json FILE] [--header TEXT]
//
// `disk` and `tree` measure the library in this process against dd, cat, pread, zlib's CRC, find and the real
// `cache-fsck`; `tools/bench` adds the network cases (fetch, proxy) with `row`, and prints everything with `table`.

import ArgumentParser
import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// MARK: Rows

/// One case of the table: the project's figure and the baseline's for each round (paired by index).
struct SuiteRow: Codable {
  var name: String
  var unit: String
  var project: [Double]
  var baseline: [Double]?
  var baselineName: String?
  /// `>=` or `<=` on the ratio project/baseline when there is a baseline, else on the project's median.
  var targetOperator: String
  var target: Double
  var note: String?

  /// The median over rounds of project/baseline.
  var ratio: Double? {
    guard let baseline, !baseline.isEmpty, baseline.count == project.count else { return nil }
    return median(zip(project, baseline).map { $0 / $1 })
  }

  /// The figure the target is checked against.
  var checked: Double { ratio ?? median(project) }

  var passes: Bool {
    switch targetOperator {
    case ">=": checked >= target
    case "<=": checked <= target
    case "<": checked < target
    default: false
    }
  }

  func append(to path: String) throws {
    var line = try JSONEncoder().encode(self)
    line.append(0x0A)
    guard let handle = FileHandle(forWritingAtPath: path) ?? createFile(path) else {
      throw BenchError("cannot write \(path)")
    }
    defer { try? handle.close() }
    try handle.seekToEnd()
    try handle.write(contentsOf: line)
  }

  private func createFile(_ path: String) -> FileHandle? {
    guard FileManager.default.createFile(atPath: path, contents: nil) else { return nil }
    return FileHandle(forWritingAtPath: path)
  }
}

func readRows(_ path: String) throws -> [SuiteRow] {
  let text = try String(contentsOfFile: path, encoding: .utf8)
  return try text.split(separator: "\n").map { try JSONDecoder().decode(SuiteRow.self, from: Data($0.utf8)) }
}

/// `row`: one row from the command line (the network cases of tools/bench).
struct RowCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "row",
    abstract: "Append one row of the suite (a network case of tools/bench) to FILE.",
    discussion: """
      --project and --baseline are comma-separated numbers; --target is OP,VALUE with OP one of >= <= <.
      """)

  @Option var rows: String
  @Option var name: String
  @Option var unit: String
  @Option var project: String
  @Option var baseline: String?
  @Option var baselineName: String?
  @Option var target: String
  @Option var note: String?

  func run() throws {
    func numbers(_ text: String) throws -> [Double] {
      try text.split(separator: ",").map {
        guard let value = Double($0) else { throw ValidationError("not a number: '\($0)'") }
        return value
      }
    }
    let target = target.split(separator: ",")
    guard target.count == 2, let value = Double(target[1]), ["<=", ">=", "<"].contains(String(target[0]))
    else {
      throw ValidationError("--target is OP,VALUE with OP one of >= <= <")
    }
    let row = SuiteRow(
      name: name, unit: unit,
      project: try numbers(project),
      baseline: try baseline.map(numbers),
      baselineName: baselineName,
      targetOperator: String(target[0]), target: value, note: note)
    try row.append(to: rows)
  }
}

/// `table`: prints every row, and writes them with their ratios and verdicts as JSON.
struct TableCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "table",
    abstract:
      "Print every row of the suite as a table, and write them with their ratios and verdicts as JSON.")

  @Option var rows: String
  @Option var json: String?
  @Option var header: String?

  func run() throws {
    let rows = try readRows(self.rows)
    func figure(_ value: Double) -> String {
      value >= 100 ? fixed(value, 0) : value >= 1 ? fixed(value, 1) : fixed(value, 3)
    }
    var lines: [[String]] = [["case", "mediacache", "baseline", "ratio", "target", "result"]]
    for row in rows {
      let baseline = row.baseline.map { "\(figure(median($0))) \(row.baselineName ?? "")" } ?? "-"
      lines.append([
        row.name, "\(figure(median(row.project))) \(row.unit)", baseline,
        row.ratio.map { fixed($0, 2) } ?? "-",
        "\(row.targetOperator) \(row.target)\(row.baseline == nil ? " \(row.unit)" : "x")",
        row.passes ? "pass" : "MISS",
      ])
    }
    let widths = (0..<6).map { column in lines.map { $0[column].count }.max() ?? 0 }
    if let header = header { print(header) }
    for (index, line) in lines.enumerated() {
      print(
        line.enumerated().map { column, text in
          column == 0
            ? text.padding(toLength: widths[0], withPad: " ", startingAt: 0)
            : String(repeating: " ", count: widths[column] - text.count) + text
        }.joined(separator: "  "))
      if index == 0 { print(String(repeating: "-", count: widths.reduce(0, +) + 10)) }
    }
    for row in rows where row.note != nil { print("  \(row.name): \(row.note!)") }
    if let path = json {
      let objects: [JSON] = rows.map { row in
        var fields: [(String, JSON)] = [
          ("case", .string(row.name)), ("unit", .string(row.unit)),
          ("project", .array(row.project.map(JSON.number))),
          ("project_median", .number(median(row.project))),
          ("target", .string("\(row.targetOperator) \(row.target)")), ("pass", .bool(row.passes)),
        ]
        if let baseline = row.baseline {
          fields.append(("baseline_name", .string(row.baselineName ?? "")))
          fields.append(("baseline", .array(baseline.map(JSON.number))))
          fields.append(("baseline_median", .number(median(baseline))))
        }
        if let ratio = row.ratio { fields.append(("ratio", .number(ratio))) }
        if let note = row.note { fields.append(("note", .string(note))) }
        return .object(fields)
      }
      var document: [(String, JSON)] = [("cases", .array(objects))]
      if let header = header { document.insert(("machine", .string(header)), at: 0) }
      try (JSON.object(document).text + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }
  }
}

// MARK: disk: write, read, random reads

/// A file of `size` pseudo-random bytes, read once so it sits in the page cache.
func makeSourceFile(_ path: String, size: Int64) throws {
  let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  guard fd >= 0 else { throw BenchError("cannot create \(path): \(errnoText())") }
  defer { close(fd) }
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
  defer { buffer.deallocate() }
  var random = XorShift(state: 0x5EED_0F_5EED)
  var offset: Int64 = 0
  while offset < size {
    random.fill(buffer)
    let count = Int(min(Int64(buffer.count), size - offset))
    guard pwrite(fd, buffer.baseAddress, count, off_t(offset)) == count else {
      throw BenchError("cannot write \(path): \(errnoText())")
    }
    offset += Int64(count)
  }
}

/// Reads `path` in 1 MiB pieces with pread, handing each to `body`.
func forEachMiB(of path: String, _ body: (UnsafeRawBufferPointer, Int64) throws -> Void) throws {
  let fd = open(path, O_RDONLY)
  guard fd >= 0 else { throw BenchError("cannot open \(path): \(errnoText())") }
  defer { close(fd) }
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
  defer { buffer.deallocate() }
  var offset: Int64 = 0
  while true {
    let count = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
    guard count >= 0 else { throw BenchError("cannot read \(path): \(errnoText())") }
    if count == 0 { return }
    try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), offset)
    offset += Int64(count)
  }
}

/// Writes the bytes of `source` as one object through `FileHandleAssetDataManager` (1 MiB writes, CRC on) and
/// closes it (the durable mode flushes at the end); returns the seconds taken.
func writeObject(from source: String, size: Int64, store: ShardedStore, id: ObjectID) throws -> Double {
  try timed {
    let manager = try FileHandleAssetDataManager(store: store, id: id)
    try manager.setContentLength(size)
    try forEachMiB(of: source) { piece, offset in try manager.write(piece, at: offset) }
    try manager.close()
  }.seconds
}

struct DiskCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "disk",
    abstract: "The disk cases of tools/bench (see tools/bench-src/Suite.swift and docs/PERFORMANCE.md).")

  @Option var dir: String
  @Option var rows: String
  @Option var sizeMib: Positive = 1024
  @Option var rounds: Positive = 3
  @Option var reads: Positive = 10000

  func run() async throws {
    let directory = dir
    let rowsPath = rows
    let sizeMiB = sizeMib.value
    let rounds = rounds.value
    let readCount = reads.value
    let size = Int64(sizeMiB) << 20
    let source = "\(directory)/source.bin"
    try makeSourceFile(source, size: size)
    try forEachMiB(of: source) { _, _ in }
    let id = CacheKey("mediacache-bench/disk").objectID
    print("== disk: write, read and random reads of a \(sizeMiB) MiB object, \(rounds) rounds")

    // Write, relaxed and durable, each round against dd of the same bytes (order alternating).
    for durability in [Durability.relaxed, .durable] {
      var project: [Double] = []
      var baseline: [Double] = []
      for round in 0..<rounds {
        let ddOut = "\(directory)/dd.out"
        let cache = "\(directory)/cache-write"
        func runLibrary() throws {
          let store = try ShardedStore(root: cache, chunkSize: 1 << 20, durability: durability)
          sync()
          project.append(mibPerSecond(size, try writeObject(from: source, size: size, store: store, id: id)))
          try FileManager.default.removeItem(atPath: cache)
        }
        func runBaseline() throws {
          sync()
          let seconds = try runDD(
            ["if=\(source)", "of=\(ddOut)", "bs=1M"] + (durability == .durable ? ["conv=fsync"] : []),
            scratchDirectory: directory)
          baseline.append(mibPerSecond(size, seconds))
          unlink(ddOut)
        }
        if round % 2 == 0 {
          try runBaseline()
          try runLibrary()
        } else {
          try runLibrary()
          try runBaseline()
        }
        print(
          "  write \(durability): round \(round + 1): library \(fixed(project.last!)) MiB/s, dd \(fixed(baseline.last!)) MiB/s"
        )
      }
      try SuiteRow(
        name: "write \(sizeMiB) MiB, 1 MiB chunks, \(durability)", unit: "MiB/s", project: project,
        baseline: baseline, baselineName: durability == .durable ? "dd fsync" : "dd", targetOperator: ">=",
        target: 0.9
      ).append(to: rowsPath)
    }

    // Read it back with every chunk verified, against cat and zlib's CRC over the data file (the issue's
    // baseline), and, as a stricter figure, the library's own folded CRC.
    let cache = "\(directory)/cache-read"
    let store = try ShardedStore(root: cache, chunkSize: 1 << 20, durability: .relaxed)
    _ = try writeObject(from: source, size: size, store: store, id: id)
    let dataFile = store.paths(for: id).data
    unlink(source)
    guard let shell = findExecutable("sh") else { throw BenchError("sh is not on PATH") }
    _ = try timeCommand(shell, ["-c", "cat '\(dataFile)' > /dev/null"])  // warm
    var project: [Double] = []
    var baseline: [Double] = []
    var strict: [Double] = []
    var note = ""
    for round in 0..<rounds {
      let manager = try FileHandleAssetDataManager(store: store, id: id, writable: false)
      let (bytes, seconds) = try await timedAsync {
        var total: Int64 = 0
        for try await piece in manager.bytes(in: 0..<size) { total += Int64(piece.count) }
        return total
      }
      try manager.close()
      guard bytes == size else { throw BenchError("read back \(bytes) of \(size) bytes") }
      let cat = mibPerSecond(size, try timeCommand(shell, ["-c", "cat '\(dataFile)' > /dev/null"]))
      // The issue's baseline is zlib's crc32; the library's own (folded) CRC is timed too, as a stricter one.
      var crc: UInt32 = 0
      let crcSeconds = try timed {
        try forEachMiB(of: dataFile) { piece, _ in crc = CRC32.zlibChecksum(piece) ^ crc }
      }.seconds
      let foldedSeconds = try timed {
        try forEachMiB(of: dataFile) { piece, _ in crc = CRC32.checksum(piece) ^ crc }
      }.seconds
      let crcSpeed = mibPerSecond(size, crcSeconds)
      let foldedSpeed = mibPerSecond(size, foldedSeconds)
      project.append(mibPerSecond(size, seconds))
      baseline.append(min(cat, crcSpeed))
      strict.append(min(cat, foldedSpeed))
      note =
        "baseline = slower of cat (\(fixed(cat)) MiB/s) and pread + zlib crc32 (\(fixed(crcSpeed)) MiB/s), last round;"
        + " against pread + the library's own folded CRC (\(fixed(foldedSpeed)) MiB/s) the ratio is"
        + " \(fixed(median(zip(project, strict).map { $0 / $1 }), 2))"
      print(
        "  read: round \(round + 1): library \(fixed(project.last!)) MiB/s, cat \(fixed(cat)), zlib crc32 \(fixed(crcSpeed)),"
          + " folded crc \(fixed(foldedSpeed))"
      )
    }
    try SuiteRow(
      name: "read \(sizeMiB) MiB cached, every chunk verified", unit: "MiB/s", project: project,
      baseline: baseline,
      baselineName: "cat|crc32", targetOperator: ">=", target: 0.9, note: note
    ).append(to: rowsPath)

    // Random 64 KiB reads: the library (each read verifies the chunks it touches) against plain pread.
    try randomReads(
      store: store, id: id, size: size, count: readCount, rounds: rounds, label: "1 MiB chunks",
      rows: rowsPath)
    // The same with 64 KiB chunks: what verification costs when a chunk is the size of a read.
    let small = try ShardedStore(root: "\(directory)/cache-small", chunkSize: 64 << 10, durability: .relaxed)
    let smallSource = "\(directory)/source.bin"
    try makeSourceFile(smallSource, size: size)
    _ = try writeObject(from: smallSource, size: size, store: small, id: id)
    unlink(smallSource)
    try randomReads(
      store: small, id: id, size: size, count: readCount, rounds: rounds, label: "64 KiB chunks",
      rows: rowsPath
    )
  }
}

func timedAsync<T>(_ body: () async throws -> T) async rethrows -> (result: T, seconds: Double) {
  let clock = ContinuousClock()
  let start = clock.now
  let result = try await body()
  return (result, seconds(clock.now - start))
}

func randomReads(
  store: ShardedStore, id: ObjectID, size: Int64, count: Int, rounds: Int, label: String, rows: String
) throws {
  let length = 64 << 10
  var random = XorShift(state: 0xABCD_EF01)
  let offsets = (0..<count).map { _ in Int64(random.next() % UInt64(size - Int64(length))) }
  let fd = open(store.paths(for: id).data, O_RDONLY)
  guard fd >= 0 else { throw BenchError("cannot open the data file: \(errnoText())") }
  defer { close(fd) }
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: length, alignment: 4096)
  defer { buffer.deallocate() }
  let manager = try FileHandleAssetDataManager(store: store, id: id, writable: false)
  defer { try? manager.close() }
  let clock = ContinuousClock()
  var project: [Double] = []
  var baseline: [Double] = []
  var libraryP99: [Double] = []
  var preadP99: [Double] = []
  func p99(_ values: [Double]) -> Double { values.sorted()[min(values.count - 1, values.count * 99 / 100)] }
  for round in 0..<rounds {
    var latencies: [Double] = []
    latencies.reserveCapacity(count)
    var start = clock.now
    for offset in offsets {
      let before = clock.now
      guard pread(fd, buffer.baseAddress, length, off_t(offset)) == length else {
        throw BenchError("short pread: \(errnoText())")
      }
      latencies.append(seconds(clock.now - before))
    }
    baseline.append(mibPerSecond(Int64(count * length), seconds(clock.now - start)))
    preadP99.append(p99(latencies) * 1e6)
    latencies.removeAll(keepingCapacity: true)
    start = clock.now
    for offset in offsets {
      let before = clock.now
      let data = try manager.read(offset..<offset + Int64(length))
      guard data.count == length else { throw BenchError("short read from the library") }
      latencies.append(seconds(clock.now - before))
    }
    project.append(mibPerSecond(Int64(count * length), seconds(clock.now - start)))
    libraryP99.append(p99(latencies) * 1e6)
    print(
      "  random 64 KiB reads, \(label): round \(round + 1): library \(fixed(project.last!)) MiB/s"
        + " (p99 \(fixed(libraryP99.last!)) µs), pread \(fixed(baseline.last!)) MiB/s (p99 \(fixed(preadP99.last!)) µs)"
    )
  }
  try SuiteRow(
    name: "\(count) random 64 KiB reads, \(label)", unit: "MiB/s", project: project, baseline: baseline,
    baselineName: "pread", targetOperator: ">=", target: 0.8,
    note:
      "p99 latency: library \(fixed(median(libraryP99))) µs, pread \(fixed(median(preadP99))) µs (medians)"
  ).append(to: rows)
}

// MARK: tree: open, compactor, fsck --fast

struct TreeCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "tree",
    abstract: "The tree cases of tools/bench (see tools/bench-src/Suite.swift and docs/PERFORMANCE.md).")

  @Option var dir: String
  @Option var rows: String
  @Option var fsck: String
  @Option var objects: Positive = 100000
  @Option var rounds: Positive = 5

  func run() async throws {
    let directory = dir
    let rowsPath = rows
    let fsck = fsck
    let objects = objects.value
    let rounds = rounds.value
    let root = "\(directory)/tree"
    print("== tree: a cache of \(objects) small objects, \(rounds) rounds")
    try makeTree(root: root, count: objects)
    guard let find = findExecutable("find") else { throw BenchError("find is not on PATH") }
    let findArguments = ["\(root)/objects", "-type", "f", "-printf", "%T@ %s\n"]
    _ = try timeCommand(find, findArguments)  // warm the dentry and inode caches for every side

    // Opening: the facade over the tree, and the status of one object (the first useful answer).
    var open: [Double] = []
    for _ in 0..<rounds {
      let seconds = try timed {
        var configuration = MediaCache.Configuration(directory: FilePath(root), chunkSize: 4096)
        configuration.createDirectory = false
        let cache = try MediaCache(configuration: configuration)
        let manifest = try cache.store.readManifest(cache.objectID(for: "https://bench.example/object/0"))
        guard manifest?.isComplete == true else { throw BenchError("object 0 is not complete") }
      }.seconds
      open.append(seconds * 1000)
    }
    try SuiteRow(
      name: "open a cache of \(objects) objects + one lookup", unit: "ms", project: open, baseline: nil,
      baselineName: nil, targetOperator: "<", target: 50
    ).append(to: rowsPath)

    let store = try ShardedStore(root: root, chunkSize: 4096, create: false)
    let total = try store.scanObjects().reduce(0) { $0 + $1.diskBytes }
    let compactor = Compactor(store: store, policy: CompactionPolicy(maxSize: total + 1, maxAge: nil))
    var findTimes: [Double] = []
    var passTimes: [Double] = []
    var fsckTimes: [Double] = []
    var findTimes2: [Double] = []
    for round in 0..<rounds {
      findTimes.append(try timeCommand(find, findArguments) * 1000)
      passTimes.append(try timed { try compactor.runPass() }.seconds * 1000)
      fsckTimes.append(try timeCommand(fsck, ["--fast", "-n", root]) * 1000)
      findTimes2.append(try timeCommand(find, findArguments) * 1000)
      print(
        "  round \(round + 1): find \(fixed(findTimes.last!)) ms, compactor pass \(fixed(passTimes.last!)) ms,"
          + " cache-fsck --fast \(fixed(fsckTimes.last!)) ms, find \(fixed(findTimes2.last!)) ms")
    }
    // Each side is paired with the find run next to it.
    try SuiteRow(
      name: "compactor pass, \(objects) objects", unit: "ms", project: passTimes, baseline: findTimes,
      baselineName: "find", targetOperator: "<=", target: 1.5,
      note: "pass in-process (stat of every object, no eviction)"
    ).append(to: rowsPath)
    try SuiteRow(
      name: "cache-fsck --fast, \(objects) objects", unit: "ms", project: fsckTimes, baseline: findTimes2,
      baselineName: "find", targetOperator: "<=", target: 2,
      note: "the real cache-fsck binary, process start included"
    ).append(to: rowsPath)
    try await groupRemoval(root: root, objects: objects, rounds: rounds, rowsPath: rowsPath)
  }

  /// `MediaCache.remove(group:)` of a 5-object group in the tree: each round stores the group's objects, then
  /// times the removal (the index directory, five manifests, five exclusive locks and unlinks, fsync-free).
  func groupRemoval(root: String, objects: Int, rounds: Int, rowsPath: String) async throws {
    var configuration = MediaCache.Configuration(
      directory: FilePath(root), chunkSize: 4096, memoryCostLimit: 0, durability: .relaxed)
    configuration.createDirectory = false
    let cache = try MediaCache(configuration: configuration)
    var times: [Double] = []
    for round in 0..<rounds {
      let group = "bench-file-\(round)"
      for member in ["preview", "thumbnail", "poster", "video-480p", "video-1080p"] {
        try await cache.store(
          Data(repeating: UInt8(round), count: 8192), for: "https://bench.example/\(group)/\(member)",
          policy: .diskOnly, group: group)
      }
      let (report, elapsed) = try await timedAsync { try await cache.remove(group: group) }
      guard report.objectsRemoved == 5 else { throw BenchError("removed \(report.objectsRemoved) of 5") }
      times.append(elapsed * 1000)
      print("  round \(round + 1): remove(group:) of 5 objects \(fixed(times.last!, 2)) ms")
    }
    try SuiteRow(
      name: "remove a 5-object group among \(objects) objects", unit: "ms", project: times, baseline: nil,
      baselineName: nil, targetOperator: "<", target: 50,
      note: "MediaCache.remove(group:) through the group index, no walk"
    ).append(to: rowsPath)
  }
}
