// mediacache-bench: measurements behind two claims of the library, and a dump of the manifest format.
//
//   mediacache-bench fileio    --file PATH [--size-mib N] [--piece-kib K] [--rounds R] [--no-dd] [--json]
//   mediacache-bench write-rss --cache DIR [--size-gib G] [--chunk-mib C | --chunk-kib K] [--no-dd] [--json]
//   mediacache-bench make-tree --cache DIR [--objects N]
//   mediacache-bench compactor-pass --cache DIR [--rounds R] [--json]
//   mediacache-bench make-big-tree --cache DIR [--objects N] [--size-mib M]
//   mediacache-bench fsck-pass --cache DIR [--rounds R] [--json]
//   mediacache-bench dump-example-manifest
//
// `fileio` compares ways of reading a file sequentially (why the library uses positional reads).
// `write-rss` writes and reads back one large object through the library and reports peak memory (whole
// objects never sit in RAM). `dump-example-manifest` prints a fixed manifest made by the real encoder, for
// docs/FORMAT.md.

import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// MARK: Arguments

struct BenchError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// A mistake in the command line: reported with the usage text.
struct UsageError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

let usage = """
  usage:
    mediacache-bench fileio --file PATH [--size-mib N] [--piece-kib K] [--rounds R] [--no-dd] [--json]
        Creates PATH (N MiB of pseudo-random bytes, default 1024) if missing, then reads it sequentially in
        K KiB pieces (default 1024) with FileHandle.read(upToCount:), FileHandle + pread, and open + pread
        (the library's way), R rounds (default 4) in rotating order, with `dd bs=1M` as the baseline.
        The page cache is not dropped: the figures are warm-cache.
    mediacache-bench write-rss --cache DIR [--size-gib G] [--chunk-mib C | --chunk-kib K] [--no-dd] [--json]
        Writes one G GiB object (default 4) in 1 MiB pieces through FileHandleAssetDataManager into a
        relaxed-durability ShardedStore at DIR (chunk size C MiB or K KiB, default 1 MiB), reads it back
        with bytes(in:), reports peak RSS and throughput against `dd` (run before and after), then removes
        the object.
    mediacache-bench make-tree --cache DIR [--objects N]
        Creates N small objects (default 100000) with recency stamps spread over 100 days.
    mediacache-bench compactor-pass --cache DIR [--rounds R] [--json]
        Times `find DIR/objects -type f -printf '%T@ %s\n'` and compaction passes (no eviction; dry run down
        to half the size) over the tree, alternating, R rounds (default 5); reports medians and peak RSS.
    mediacache-bench make-big-tree --cache DIR [--objects N] [--size-mib M]
        Creates N objects (default 16) of M MiB (default 128) with 1 MiB chunks.
    mediacache-bench fsck-pass --cache DIR [--rounds R] [--json]
        Times find, the checker's --fast pass, `cat` of every data file and full CRC verification over the
        tree, alternating, R rounds (default 3), plus zlib's CRC speed; reports medians and ratios.
    mediacache-bench run-rss -- COMMAND [ARGS...]
        Runs COMMAND (stdout to /dev/null) and prints its wall time and peak RSS (wait4 rusage).
    mediacache-bench disk --dir DIR --rows FILE [--size-mib N] [--rounds R] [--reads N]
    mediacache-bench tree --dir DIR --rows FILE --fsck PATH [--objects N] [--rounds R]
    mediacache-bench row --rows FILE --name NAME --unit UNIT --project V,.. [--baseline V,.. --baseline-name B]
                         --target OP,VALUE [--note TEXT]
    mediacache-bench table --rows FILE [--json FILE] [--header TEXT]
        The suite of tools/bench (see tools/bench-src/Suite.swift and docs/PERFORMANCE.md): cases measured
        against baselines in the same run, one row each, printed as a table.
    mediacache-bench floor-server
        A minimal SwiftNIO server set up like the proxy, answering every request with 64 KiB from memory:
        the floor under the proxy's time to first byte (tools/bench-src/FloorServer.swift).
    mediacache-bench fanout --urls FILE --size BYTES
        Fetches every URL of FILE at once, one plain-socket client per thread; prints each client's time to
        first byte and their p50/p99 (tools/bench-src/RawClients.swift).
    mediacache-bench play-script --url URL --size BYTES [--first K] [--probe M] [--chunk C]
        A player's cold play of an MP4 with its moov at the end (start, tail, probe, seek, play to the end);
        prints the bytes it consumed (the union of its ranges) and the whole C-byte chunks those touch.
    mediacache-bench delay-relay --upstream PORT --delay-ms MS [--rate-kib K]
        A loopback TCP relay to 127.0.0.1:PORT that holds each new connection MS ms (default 50) first: the
        first-byte latency of a real origin (tools/bench-src/DelayRelay.swift).
    mediacache-bench dump-example-manifest
        Prints a hex dump and field walk of a fixed example manifest made by ManifestCodec.encode.
  """

struct Arguments {
  var command: String
  var values: [String: String] = [:]
  var flags: Set<String> = []

  static let valueOptions: [String: Set<String>] = [
    "fileio": ["--file", "--size-mib", "--piece-kib", "--rounds"],
    "write-rss": ["--cache", "--size-gib", "--chunk-mib", "--chunk-kib"],
    "dump-example-manifest": [],
    "make-tree": ["--cache", "--objects"],
    "compactor-pass": ["--cache", "--rounds"],
    "make-big-tree": ["--cache", "--objects", "--size-mib"],
    "fsck-pass": ["--cache", "--rounds"],
    "disk": ["--dir", "--rows", "--size-mib", "--rounds", "--reads"],
    "tree": ["--dir", "--rows", "--fsck", "--objects", "--rounds"],
    "row": [
      "--rows", "--name", "--unit", "--project", "--baseline", "--baseline-name", "--target", "--note",
    ],
    "table": ["--rows", "--json", "--header"],
    "floor-server": [],
    "fanout": ["--urls", "--size"],
    "play-script": ["--url", "--size", "--first", "--probe", "--chunk"],
    "delay-relay": ["--upstream", "--delay-ms", "--rate-kib"],
  ]
  static let flagOptions: [String: Set<String>] = [
    "fileio": ["--json", "--no-dd"],
    "write-rss": ["--json", "--no-dd"],
    "dump-example-manifest": [],
    "make-tree": [],
    "compactor-pass": ["--json"],
    "make-big-tree": [],
    "fsck-pass": ["--json"],
    "disk": [],
    "tree": [],
    "row": [],
    "table": [],
    "floor-server": [],
    "fanout": [],
    "play-script": [],
    "delay-relay": [],
  ]

  init(_ argv: [String]) throws {
    guard argv.count >= 2 else { throw UsageError("missing subcommand") }
    command = argv[1]
    guard let valueNames = Self.valueOptions[command], let flagNames = Self.flagOptions[command] else {
      throw UsageError("unknown subcommand '\(command)'")
    }
    var index = 2
    while index < argv.count {
      let argument = argv[index]
      var name = argument
      var inlineValue: String?
      if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
        name = String(argument[..<equals])
        inlineValue = String(argument[argument.index(after: equals)...])
      }
      if valueNames.contains(name) {
        if let inlineValue {
          values[name] = inlineValue
        } else {
          guard index + 1 < argv.count else { throw UsageError("\(name) needs a value") }
          index += 1
          values[name] = argv[index]
        }
      } else if flagNames.contains(name) && inlineValue == nil {
        flags.insert(name)
      } else {
        throw UsageError("unknown option '\(argument)' for \(command)")
      }
      index += 1
    }
  }

  func string(_ name: String) throws -> String {
    guard let value = values[name], !value.isEmpty else { throw UsageError("\(command) needs \(name)") }
    return value
  }

  func positive(_ name: String, default fallback: Int) throws -> Int {
    guard let text = values[name] else { return fallback }
    guard let value = Int(text), value > 0 else {
      throw UsageError("\(name) must be a positive integer, not '\(text)'")
    }
    return value
  }
}

// MARK: Output

/// A JSON value with object keys kept in insertion order.
indirect enum JSON {
  case number(Double)
  case integer(Int64)
  case string(String)
  case bool(Bool)
  case array([JSON])
  case object([(String, JSON)])
  case null

  var text: String {
    switch self {
    case .number(let value):
      guard value.isFinite else { return "null" }
      return String(format: "%.3f", value)
    case .integer(let value): return String(value)
    case .string(let value): return Self.quote(value)
    case .bool(let value): return value ? "true" : "false"
    case .null: return "null"
    case .array(let values): return "[" + values.map(\.text).joined(separator: ",") + "]"
    case .object(let fields):
      return "{" + fields.map { "\(Self.quote($0.0)):\($0.1.text)" }.joined(separator: ",") + "}"
    }
  }

  static func quote(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\t": out += "\\t"
      case "\r": out += "\\r"
      default:
        if scalar.value < 0x20 {
          out += String(format: "\\u%04x", scalar.value)
        } else {
          out.unicodeScalars.append(scalar)
        }
      }
    }
    return out + "\""
  }
}

/// Human-readable lines and a JSON object built side by side; one of them is printed at the end.
struct Report {
  var lines: [String] = []
  var fields: [(String, JSON)] = []

  mutating func line(_ text: String) { lines.append(text) }
  mutating func set(_ key: String, _ value: JSON) { fields.append((key, value)) }

  func emit(json: Bool) {
    if json {
      print(JSON.object(fields).text)
    } else {
      for line in lines { print(line) }
    }
  }
}

func fixed(_ value: Double, _ decimals: Int = 1) -> String {
  value.isFinite ? String(format: "%.\(decimals)f", value) : "n/a"
}

// MARK: Measurement helpers

func seconds(_ duration: Duration) -> Double {
  Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func timed<T>(_ body: () throws -> T) rethrows -> (result: T, seconds: Double) {
  let clock = ContinuousClock()
  let start = clock.now
  let result = try body()
  return (result, seconds(clock.now - start))
}

func mibPerSecond(_ bytes: Int64, _ seconds: Double) -> Double {
  seconds > 0 ? Double(bytes) / 1_048_576 / seconds : .infinity
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  guard !sorted.isEmpty else { return .nan }
  let middle = sorted.count / 2
  return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

/// `key: value` lines of a /proc file (Linux), values as the first integer on the line.
func procFields(_ path: String) -> [String: Int64] {
  let fd = open(path, O_RDONLY | O_CLOEXEC)
  guard fd >= 0 else { return [:] }
  defer { close(fd) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 8192)
  while true {
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    if count <= 0 { break }
    bytes.append(contentsOf: buffer[..<count])
  }
  var fields: [String: Int64] = [:]
  for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
    guard let colon = line.firstIndex(of: ":") else { continue }
    let value = line[line.index(after: colon)...].split(whereSeparator: { $0 == " " || $0 == "\t" }).first
      .flatMap { Int64($0) }
    if let value { fields[String(line[..<colon])] = value }
  }
  return fields
}

/// Read system calls this process has made so far (`syscr` in /proc/self/io), nil where unavailable.
func readSyscallCount() -> Int64? { procFields("/proc/self/io")["syscr"] }

struct MemorySnapshot {
  /// Peak resident set size from getrusage, KiB.
  var maxRSSKiB: Int64
  /// Peak and current resident set size from /proc/self/status (Linux), KiB.
  var vmHWMKiB: Int64?
  var vmRSSKiB: Int64?

  static func now() -> MemorySnapshot {
    var usage = rusage()
    #if os(Linux)
      _ = getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #else
      _ = getrusage(RUSAGE_SELF, &usage)
    #endif
    #if os(Linux)
      let maxRSS = Int64(usage.ru_maxrss)  // KiB on Linux
    #else
      let maxRSS = Int64(usage.ru_maxrss) / 1024  // bytes on Darwin
    #endif
    let status = procFields("/proc/self/status")
    return MemorySnapshot(maxRSSKiB: maxRSS, vmHWMKiB: status["VmHWM"], vmRSSKiB: status["VmRSS"])
  }

  var text: String {
    var parts = ["ru_maxrss \(mib(maxRSSKiB)) MiB"]
    if let vmHWMKiB { parts.append("VmHWM \(mib(vmHWMKiB)) MiB") }
    if let vmRSSKiB { parts.append("VmRSS \(mib(vmRSSKiB)) MiB") }
    return parts.joined(separator: ", ")
  }

  var json: JSON {
    .object([
      ("ru_maxrss_kib", .integer(maxRSSKiB)),
      ("vm_hwm_kib", vmHWMKiB.map { .integer($0) } ?? .null),
      ("vm_rss_kib", vmRSSKiB.map { .integer($0) } ?? .null),
    ])
  }

  func mib(_ kib: Int64) -> String { fixed(Double(kib) / 1024, 1) }
}

/// A cheap, deterministic pseudo-random stream (xorshift64*).
struct XorShift {
  var state: UInt64

  mutating func next() -> UInt64 {
    state ^= state >> 12
    state ^= state << 25
    state ^= state >> 27
    return state &* 0x2545_F491_4F6C_DD1D
  }

  mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
    let words = buffer.count / 8
    for index in 0..<words { buffer.storeBytes(of: next(), toByteOffset: index * 8, as: UInt64.self) }
    for index in (words * 8)..<buffer.count { buffer[index] = UInt8(truncatingIfNeeded: next()) }
  }
}

// MARK: Subprocesses

/// Where `dd` is, from PATH.
func findExecutable(_ name: String) -> String? {
  let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
  for directory in path.split(separator: ":") where !directory.isEmpty {
    let candidate = "\(directory)/\(name)"
    if access(candidate, X_OK) == 0 { return candidate }
  }
  return nil
}

/// Runs `dd` with `arguments` (C locale, stdout to /dev/null, stderr kept) and returns its wall time from spawn
/// to exit. `posix_spawn` + `waitpid` rather than `Process`, whose wait polls a run loop.
func runDD(_ arguments: [String], scratchDirectory: String) throws -> Double {
  guard let dd = findExecutable("dd") else { throw BenchError("dd not found in PATH") }
  let stderrPath = "\(scratchDirectory)/.mediacache-bench-dd.\(getpid()).err"
  defer { unlink(stderrPath) }
  #if os(Linux)
    var actions = posix_spawn_file_actions_t()
  #else
    var actions: posix_spawn_file_actions_t?
  #endif
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
  posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  let argv: [UnsafeMutablePointer<CChar>?] = ([dd] + arguments).map { strdup($0) } + [nil]
  let envp: [UnsafeMutablePointer<CChar>?] = [strdup("LC_ALL=C"), strdup("PATH=/usr/bin:/bin"), nil]
  defer { for pointer in argv + envp { free(pointer) } }
  var pid: pid_t = 0
  let clock = ContinuousClock()
  let start = clock.now
  let spawned = posix_spawn(&pid, dd, &actions, nil, argv, envp)
  guard spawned == 0 else { throw BenchError("cannot run dd: \(errnoText(spawned))") }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) == -1 {
    guard errno == EINTR else { throw BenchError("waitpid failed: \(errnoText())") }
  }
  let elapsed = seconds(clock.now - start)
  // Exited normally with status 0: low 7 bits (signal) and the exit code byte are both zero.
  guard status == 0 else {
    let message = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
    throw BenchError(
      "dd \(arguments.joined(separator: " ")) failed (wait status \(status)): "
        + message.trimmingCharacters(in: .whitespacesAndNewlines))
  }
  return elapsed
}

// MARK: fileio

enum ReadMethod: String, CaseIterable {
  case fileHandleRead = "FileHandle.read(upToCount:)"
  case fileHandlePread = "FileHandle + pread"
  case positional = "open + pread (library)"
  case dd = "dd bs=1M"

  var key: String {
    switch self {
    case .fileHandleRead: "filehandle_read"
    case .fileHandlePread: "filehandle_pread"
    case .positional: "pread"
    case .dd: "dd"
    }
  }
}

/// Creates the test file if it is missing; returns its size and whether it was created.
func prepareTestFile(path: String, sizeMiB: Int) throws -> (size: Int64, created: Bool) {
  var info = stat()
  if stat(path, &info) == 0 {
    guard (info.st_mode & S_IFMT) == S_IFREG else {
      throw BenchError("\(path) exists and is not a regular file")
    }
    return (Int64(info.st_size), false)
  }
  let temporary = "\(path).partial.\(getpid())"
  let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
  guard fd >= 0 else { throw BenchError("cannot create \(temporary): \(errnoText())") }
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
  defer { buffer.deallocate() }
  var random = XorShift(state: 0x9E37_79B9_7F4A_7C15)
  for piece in 0..<sizeMiB {
    random.fill(buffer)
    var done = 0
    while done < buffer.count {
      let count = pwrite(
        fd, buffer.baseAddress! + done, buffer.count - done, off_t(piece << 20) + off_t(done))
      if count < 0 && errno == EINTR { continue }
      guard count > 0 else {
        let message = errnoText()
        close(fd)
        unlink(temporary)
        throw BenchError("cannot write \(temporary): \(message)")
      }
      done += count
    }
  }
  close(fd)
  guard rename(temporary, path) == 0 else {
    throw BenchError("cannot rename \(temporary) to \(path): \(errnoText())")
  }
  return (Int64(sizeMiB) << 20, true)
}

/// Reads the whole file with `method` in `piece`-byte pieces; returns the bytes read.
func readFile(
  _ path: String, size: Int64, piece: Int, method: ReadMethod, buffer: UnsafeMutableRawBufferPointer
)
  throws -> Int64
{
  var total: Int64 = 0
  switch method {
  case .fileHandleRead:
    // The stream API as an app would use it for a range: seek, then read(upToCount:), a new Data each time.
    guard let handle = FileHandle(forReadingAtPath: path) else { throw BenchError("cannot open \(path)") }
    defer { try? handle.close() }
    var offset: Int64 = 0
    while offset < size {
      try handle.seek(toOffset: UInt64(offset))
      guard let data = try handle.read(upToCount: piece), !data.isEmpty else { break }
      total += Int64(data.count)
      offset += Int64(data.count)
    }
  case .fileHandlePread:
    // FileHandle for opening only; the bytes move with pread on its descriptor into one reused buffer.
    guard let handle = FileHandle(forReadingAtPath: path) else { throw BenchError("cannot open \(path)") }
    defer { try? handle.close() }
    let fd = handle.fileDescriptor
    while total < size {
      let count = pread(fd, buffer.baseAddress, piece, off_t(total))
      if count < 0 && errno == EINTR { continue }
      guard count >= 0 else { throw BenchError("pread \(path): \(errnoText())") }
      if count == 0 { break }
      total += Int64(count)
    }
  case .positional:
    // What SystemFile.read(into:at:) does: open(2) with O_CLOEXEC, pread until the buffer is full or EOF.
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw BenchError("cannot open \(path): \(errnoText())") }
    defer { close(fd) }
    var atEOF = false
    while total < size && !atEOF {
      var done = 0
      while done < piece {
        let count = pread(fd, buffer.baseAddress! + done, piece - done, off_t(total) + off_t(done))
        if count < 0 && errno == EINTR { continue }
        guard count >= 0 else { throw BenchError("pread \(path): \(errnoText())") }
        if count == 0 {
          atEOF = true
          break
        }
        done += count
      }
      total += Int64(done)
    }
  case .dd:
    throw BenchError("dd is run as a subprocess")
  }
  return total
}

func fileIO(_ arguments: Arguments) throws {
  let path = try arguments.string("--file")
  let sizeMiB = try arguments.positive("--size-mib", default: 1024)
  let pieceKiB = try arguments.positive("--piece-kib", default: 1024)
  let rounds = try arguments.positive("--rounds", default: 4)
  let useDD = !arguments.flags.contains("--no-dd")
  let piece = pieceKiB * 1024

  let (size, created) = try prepareTestFile(path: path, sizeMiB: sizeMiB)
  guard size > 0 else { throw BenchError("\(path) is empty") }
  let directory =
    (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: piece, alignment: 4096)
  defer { buffer.deallocate() }

  let methods = ReadMethod.allCases.filter { useDD || $0 != .dd }
  var speeds: [ReadMethod: [Double]] = [:]
  var syscalls: [ReadMethod: Int64] = [:]
  // What reading /proc/self/io itself costs in read calls, subtracted from each difference.
  let probe = (readSyscallCount() ?? 0, readSyscallCount() ?? 0)
  let probeCost = probe.1 - probe.0

  // Untimed warm-up read: every method then starts from the same (warm) page cache.
  _ = try readFile(path, size: size, piece: piece, method: .positional, buffer: buffer)

  for round in 0..<rounds {
    // Rotate the order each round, and reverse it every other round, so no method always goes first.
    var order = (0..<methods.count).map { methods[($0 + round) % methods.count] }
    if round % 2 == 1 { order.reverse() }
    for method in order {
      let elapsed: Double
      if method == .dd {
        elapsed = try runDD(["if=\(path)", "of=/dev/null", "bs=1M"], scratchDirectory: directory)
      } else {
        let before = readSyscallCount()
        let (bytes, time) = try timed {
          try readFile(path, size: size, piece: piece, method: method, buffer: buffer)
        }
        let after = readSyscallCount()
        guard bytes == size else { throw BenchError("\(method.rawValue) read \(bytes) of \(size) bytes") }
        elapsed = time
        if let before, let after { syscalls[method] = after - before - probeCost }
      }
      speeds[method, default: []].append(mibPerSecond(size, elapsed))
    }
  }

  var report = Report()
  let pieceText = pieceKiB % 1024 == 0 ? "\(pieceKiB / 1024) MiB" : "\(pieceKiB) KiB"
  report.line(
    "fileio: \(path), \(fixed(Double(size) / 1_048_576, 0)) MiB\(created ? " (created)" : ""), \(pieceText) pieces, \(rounds) rounds"
  )
  report.line(
    "note: the page cache is not dropped; the file is warm, so this measures per-call cost and copying, not the disk"
  )
  report.set("command", .string("fileio"))
  report.set("file", .string(path))
  report.set("size_bytes", .integer(size))
  report.set("created", .bool(created))
  report.set("piece_bytes", .integer(Int64(piece)))
  report.set("rounds", .integer(Int64(rounds)))
  report.set("page_cache_dropped", .bool(false))
  var methodFields: [(String, JSON)] = []
  let ddMedian = speeds[.dd].map(median)
  for method in methods {
    let values = speeds[method] ?? []
    let mid = median(values)
    var text =
      "  \(method.rawValue.padding(toLength: 28, withPad: " ", startingAt: 0)) median \(fixed(mid)) MiB/s"
      + "  (min \(fixed(values.min() ?? .nan)), max \(fixed(values.max() ?? .nan)))"
    if let calls = syscalls[method] { text += "  read calls \(calls)" }
    if let ddMedian, method != .dd { text += "  x\(fixed(mid / ddMedian, 2)) of dd" }
    report.line(text)
    var fields: [(String, JSON)] = [
      ("median_mib_s", .number(mid)), ("min_mib_s", .number(values.min() ?? .nan)),
      ("max_mib_s", .number(values.max() ?? .nan)),
    ]
    if let calls = syscalls[method] { fields.append(("read_syscalls", .integer(calls))) }
    if let ddMedian, method != .dd { fields.append(("ratio_to_dd", .number(mid / ddMedian))) }
    methodFields.append((method.key, .object(fields)))
  }
  report.set("methods", .object(methodFields))
  let fileHandle = median(speeds[.fileHandleRead] ?? [])
  let positional = median(speeds[.positional] ?? [])
  let handlePread = median(speeds[.fileHandlePread] ?? [])
  report.line("ratio pread (library) / FileHandle.read(upToCount:): \(fixed(positional / fileHandle, 2))")
  report.line("ratio FileHandle + pread / FileHandle.read(upToCount:): \(fixed(handlePread / fileHandle, 2))")
  report.set("ratio_pread_to_filehandle_read", .number(positional / fileHandle))
  report.set("ratio_filehandle_pread_to_filehandle_read", .number(handlePread / fileHandle))
  report.emit(json: arguments.flags.contains("--json"))
}

// MARK: write-rss

/// One `dd` pass over the same number of bytes: write from /dev/zero (no fsync, like the relaxed store), then read
/// back to /dev/null; the file is removed afterwards.
func ddPass(root: String, sizeGiB: Int) throws -> (write: Double, read: Double) {
  let path = "\(root)/dd.tmp"
  defer { unlink(path) }
  sync()
  let write = try runDD(
    ["if=/dev/zero", "of=\(path)", "bs=1M", "count=\(sizeGiB * 1024)"], scratchDirectory: root)
  let read = try runDD(["if=\(path)", "of=/dev/null", "bs=1M"], scratchDirectory: root)
  return (write, read)
}

func writeRSS(_ arguments: Arguments) async throws {
  let root = try arguments.string("--cache")
  let sizeGiB = try arguments.positive("--size-gib", default: 4)
  let chunkSize =
    arguments.values["--chunk-kib"] != nil
    ? try arguments.positive("--chunk-kib", default: 1024) << 10
    : try arguments.positive("--chunk-mib", default: 1) << 20
  let chunkText = chunkSize % (1 << 20) == 0 ? "\(chunkSize >> 20) MiB" : "\(chunkSize >> 10) KiB"
  let useDD = !arguments.flags.contains("--no-dd")
  let total = Int64(sizeGiB) << 30
  let pieceSize = 1 << 20

  let start = MemorySnapshot.now()
  let store = try ShardedStore(root: root, chunkSize: chunkSize, durability: .relaxed)
  // dd runs before and after the library: on a VM the first writer to touch fresh guest pages pays extra, so
  // one dd pass alone would favour whoever goes second. The baseline is the faster of the two.
  let ddBefore = useDD ? try ddPass(root: store.root, sizeGiB: sizeGiB) : nil

  let key = CacheKey("mediacache-bench/write-rss/\(getpid())/\(UUID().uuidString)")
  let id = key.objectID
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: pieceSize, alignment: 4096)
  defer { buffer.deallocate() }
  var random = XorShift(state: 0x0123_4567_89AB_CDEF)
  random.fill(buffer)

  // Write: one reused 1 MiB buffer; each piece stamps its index at the start of every 4 KiB page so that
  // every chunk's bytes (and CRC) differ at the cost of 256 stores.
  let writer = try FileHandleAssetDataManager(store: store, id: id, writable: true)
  try writer.setContentLength(total)
  // Start each timed write with no dirty pages from earlier work, so writeback throttling hits every writer alike.
  sync()
  let beforeWrite = MemorySnapshot.now()
  let pieces = Int(total / Int64(pieceSize))
  let (_, writeSeconds) = try timed {
    for index in 0..<pieces {
      for page in stride(from: 0, to: pieceSize, by: 4096) {
        buffer.storeBytes(of: UInt64(index).littleEndian, toByteOffset: page, as: UInt64.self)
      }
      try writer.write(UnsafeRawBufferPointer(buffer), at: Int64(index) * Int64(pieceSize))
    }
    try writer.close()
  }
  let afterWrite = MemorySnapshot.now()

  // Read back through the verified stream, a fresh read-only manager; check the count and each stamp.
  let reader = try FileHandleAssetDataManager(store: store, id: id, writable: false)
  guard reader.manifest.isComplete else { throw BenchError("the object is not complete after close()") }
  let clock = ContinuousClock()
  let readStart = clock.now
  var readBytes: Int64 = 0
  for try await piece in reader.bytes(in: 0..<total) {
    try piece.withUnsafeBytes { raw in
      // Check the stamp at every 1 MiB boundary inside this piece.
      var boundary = (readBytes + Int64(pieceSize) - 1) / Int64(pieceSize) * Int64(pieceSize)
      while boundary < readBytes + Int64(raw.count) {
        let stamp = UInt64(
          littleEndian: raw.loadUnaligned(fromByteOffset: Int(boundary - readBytes), as: UInt64.self))
        guard stamp == UInt64(boundary / Int64(pieceSize)) else {
          throw BenchError("wrong bytes at offset \(boundary): stamp \(stamp)")
        }
        boundary += Int64(pieceSize)
      }
    }
    readBytes += Int64(piece.count)
  }
  let readSeconds = seconds(clock.now - readStart)
  try reader.close()
  let afterRead = MemorySnapshot.now()
  guard readBytes == total else { throw BenchError("read back \(readBytes) of \(total) bytes") }
  let freed = try store.remove(id)
  let ddAfter = useDD ? try ddPass(root: store.root, sizeGiB: sizeGiB) : nil

  let writeSpeed = mibPerSecond(total, writeSeconds)
  let readSpeed = mibPerSecond(total, readSeconds)
  let peakBefore = beforeWrite.vmHWMKiB ?? beforeWrite.maxRSSKiB
  let peakAfterWrite = afterWrite.vmHWMKiB ?? afterWrite.maxRSSKiB
  let peakAfterRead = afterRead.vmHWMKiB ?? afterRead.maxRSSKiB

  var report = Report()
  report.line(
    "write-rss: \(sizeGiB) GiB object, chunk \(chunkText) (\(total / Int64(chunkSize)) chunks), 1 MiB pieces, relaxed durability, cache \(store.root)"
  )
  report.line("  peak RSS at start:        \(start.text)")
  report.line("  peak RSS before writing:  \(beforeWrite.text)")
  report.line("  peak RSS after writing:   \(afterWrite.text)")
  report.line("  peak RSS after reading:   \(afterRead.text)")
  report.line(
    "  peak RSS growth:          write +\(fixed(Double(peakAfterWrite - peakBefore) / 1024, 2)) MiB,"
      + " write+read +\(fixed(Double(peakAfterRead - peakBefore) / 1024, 2)) MiB")
  report.line(
    "  write: \(fixed(writeSeconds, 2)) s, \(fixed(writeSpeed)) MiB/s (1 MiB write() calls, then close(); sync() before)"
  )
  report.line(
    "  read:  \(fixed(readSeconds, 2)) s, \(fixed(readSpeed)) MiB/s (bytes(in:), every chunk CRC-checked)")

  report.set("command", .string("write-rss"))
  report.set("cache", .string(store.root))
  report.set("size_bytes", .integer(total))
  report.set("chunk_bytes", .integer(Int64(chunkSize)))
  report.set("piece_bytes", .integer(Int64(pieceSize)))
  report.set("durability", .string("relaxed"))
  report.set("memory_start", start.json)
  report.set("memory_before_write", beforeWrite.json)
  report.set("memory_after_write", afterWrite.json)
  report.set("memory_after_read", afterRead.json)
  report.set("peak_rss_growth_write_kib", .integer(peakAfterWrite - peakBefore))
  report.set("peak_rss_growth_total_kib", .integer(peakAfterRead - peakBefore))
  report.set("write_seconds", .number(writeSeconds))
  report.set("write_mib_s", .number(writeSpeed))
  report.set("read_seconds", .number(readSeconds))
  report.set("read_mib_s", .number(readSpeed))
  report.set("read_bytes", .integer(readBytes))
  if let ddBefore, let ddAfter {
    let ddWrite = max(mibPerSecond(total, ddBefore.write), mibPerSecond(total, ddAfter.write))
    let ddRead = max(mibPerSecond(total, ddBefore.read), mibPerSecond(total, ddAfter.read))
    report.line(
      "  dd write (bs=1M, no fsync): before \(fixed(mibPerSecond(total, ddBefore.write))), after"
        + " \(fixed(mibPerSecond(total, ddAfter.write))) MiB/s; library/best dd = \(fixed(writeSpeed / ddWrite, 2))"
    )
    report.line(
      "  dd read  (bs=1M):           before \(fixed(mibPerSecond(total, ddBefore.read))), after"
        + " \(fixed(mibPerSecond(total, ddAfter.read))) MiB/s; library/best dd = \(fixed(readSpeed / ddRead, 2))"
    )
    report.set("dd_write_mib_s_before", .number(mibPerSecond(total, ddBefore.write)))
    report.set("dd_write_mib_s_after", .number(mibPerSecond(total, ddAfter.write)))
    report.set("ratio_write_to_dd", .number(writeSpeed / ddWrite))
    report.set("dd_read_mib_s_before", .number(mibPerSecond(total, ddBefore.read)))
    report.set("dd_read_mib_s_after", .number(mibPerSecond(total, ddAfter.read)))
    report.set("ratio_read_to_dd", .number(readSpeed / ddRead))
  }
  report.line(
    "  removed the object (\(fixed(Double(freed) / 1_048_576, 1)) MiB freed)\(useDD ? " and dd.tmp" : "")")
  report.set("freed_bytes", .integer(freed))
  report.emit(json: arguments.flags.contains("--json"))
}

// MARK: dump-example-manifest

/// The fixed example manifest of docs/FORMAT.md: a 20000-byte object in 4 KiB chunks (5 chunks, the last 3616
/// bytes), of which chunks 0, 1 and 3 are present, pinned, version tag 0x1234ABCD (as after a reset), with a
/// content type, an ETag, a Last-Modified and two bytes of user metadata. The byte at offset `o` is
/// `o ^ (o >> 12)` truncated to 8 bits (so each chunk differs); the CRCs are those of these bytes.
func exampleManifest() -> Manifest {
  let id = CacheKey("https://example.com/clip.mp4").objectID
  var manifest = Manifest(
    objectID: id, chunkSize: 4096, contentLength: 20000,
    createdAt: Date(timeIntervalSince1970: 1_700_000_000.123), contentType: "video/mp4", etag: "\"v1\"",
    lastModified: "Tue, 14 Nov 2023 22:13:20 GMT", isPinned: true, userMetadata: Data("hi".utf8))
  manifest.versionTag = 0x1234_ABCD
  for index in [0, 1, 3] {
    let range = manifest.byteRange(ofChunk: index)
    let bytes = range.map { UInt8(truncatingIfNeeded: $0 ^ ($0 >> 12)) }
    manifest.setChunk(index, crc: CRC32.checksum(bytes))
  }
  return manifest
}

func hexDump(_ bytes: [UInt8]) -> [String] {
  stride(from: 0, to: bytes.count, by: 16).map { start in
    let row = bytes[start..<min(start + 16, bytes.count)]
    var hex = ""
    for (offset, byte) in row.enumerated() {
      hex += String(format: "%02x ", byte)
      if offset == 7 { hex += " " }
    }
    let ascii = String(row.map { (0x20..<0x7f).contains($0) ? Character(UnicodeScalar($0)) : "." })
    return String(format: "%08x  ", start) + hex.padding(toLength: 50, withPad: " ", startingAt: 0)
      + "|\(ascii)|"
  }
}

/// Walks the bytes by the layout of docs/FORMAT.md (not through the decoder) and names each field.
func fieldWalk(_ bytes: [UInt8]) -> [String] {
  var lines: [String] = []
  var offset = 0
  func integer(_ size: Int) -> UInt64 {
    var value: UInt64 = 0
    for index in 0..<size { value |= UInt64(bytes[offset + index]) << (8 * index) }
    return value
  }
  func field(_ size: Int, _ name: String, _ value: String) {
    let hex = bytes[offset..<(offset + size)].map { String(format: "%02x", $0) }.joined(separator: " ")
    let shown = size > 12 ? String(hex.prefix(35)) + " …" : hex
    lines.append(
      String(format: "%4d  %4d  ", offset, size) + name.padding(toLength: 22, withPad: " ", startingAt: 0)
        + shown.padding(toLength: 38, withPad: " ", startingAt: 0) + value)
    offset += size
  }
  func text(_ size: Int) -> String { String(decoding: bytes[offset..<(offset + size)], as: UTF8.self) }
  lines.append("  off  size  field                 bytes                                 value")
  field(4, "magic", text(4))
  field(1, "major version", String(integer(1)))
  field(1, "minor version", String(integer(1)))
  let flags = integer(2)
  field(
    2, "flags", "0x\(String(flags, radix: 16)) (pinned \(flags & 1 != 0), length known \(flags & 2 != 0))")
  field(32, "object id", bytes[8..<40].map { String(format: "%02x", $0) }.joined())
  field(8, "content length", String(integer(8)))
  field(4, "chunk size", String(integer(4)))
  field(4, "version tag", String(format: "0x%08x", integer(4)))
  field(8, "created (ms)", String(integer(8)))
  let runs = Int(integer(4))
  field(4, "run count", String(runs))
  let present = Int(integer(4))
  field(4, "present chunk count", String(present))
  var indices: [UInt64] = []
  for run in 0..<runs {
    let first = integer(4)
    field(4, "run \(run) first chunk", String(first))
    let count = integer(4)
    field(4, "run \(run) chunk count", String(count))
    indices += (first..<(first + count))
  }
  for index in indices { field(4, "CRC of chunk \(index)", String(format: "0x%08x", integer(4))) }
  var size = Int(integer(1))
  field(1, "content type length", String(size))
  if size > 0 { field(size, "content type", text(size)) }
  size = Int(integer(2))
  field(2, "ETag length", String(size))
  if size > 0 { field(size, "ETag", text(size)) }
  size = Int(integer(1))
  field(1, "Last-Modified length", String(size))
  if size > 0 { field(size, "Last-Modified", text(size)) }
  size = Int(integer(4))
  field(4, "user metadata length", String(size))
  if size > 0 { field(size, "user metadata", text(size)) }
  let computed = CRC32.checksum(Array(bytes[..<offset]))
  field(
    4, "manifest CRC-32",
    String(format: "0x%08x (computed over bytes 0..<%d: 0x%08x)", integer(4), offset, computed))
  if offset != bytes.count { lines.append("(\(bytes.count - offset) bytes not accounted for)") }
  return lines
}

func dumpExampleManifest() throws {
  let manifest = exampleManifest()
  let bytes = [UInt8](try ManifestCodec.encode(manifest))
  let decoded = try ManifestCodec.decode(Data(bytes), expectedID: manifest.objectID)
  guard decoded == manifest else { throw BenchError("the example manifest does not survive a decode") }
  print("key \"https://example.com/clip.mp4\" -> object id \(manifest.objectID.hex)")
  print("\(bytes.count) bytes:")
  for line in hexDump(bytes) { print(line) }
  print("")
  for line in fieldWalk(bytes) { print(line) }
}

// MARK: Main

if CommandLine.arguments.count >= 2 && ["-h", "--help", "help"].contains(CommandLine.arguments[1]) {
  print(usage)
  exit(0)
}

if CommandLine.arguments.count >= 2 && CommandLine.arguments[1] == "run-rss" {
  do {
    try runRSS(CommandLine.arguments)
    exit(0)
  } catch {
    FileHandle.standardError.write(Data("mediacache-bench: \(error)\n".utf8))
    exit(1)
  }
}

do {
  let arguments = try Arguments(CommandLine.arguments)
  switch arguments.command {
  case "fileio": try fileIO(arguments)
  case "write-rss": try await writeRSS(arguments)
  case "dump-example-manifest": try dumpExampleManifest()
  case "make-tree": try makeTree(arguments)
  case "compactor-pass": try compactorPass(arguments)
  case "make-big-tree": try makeBigTree(arguments)
  case "fsck-pass": try fsckPass(arguments)
  case "floor-server": try await floorServer(arguments)
  case "fanout": try fanout(arguments)
  case "play-script": try playScript(arguments)
  case "delay-relay": try delayRelay(arguments)
  case "disk": try await disk(arguments)
  case "tree": try tree(arguments)
  case "row": try suiteRow(arguments)
  case "table": try suiteTable(arguments)
  default: throw UsageError("unknown subcommand")
  }
} catch let error as UsageError {
  FileHandle.standardError.write(Data("mediacache-bench: \(error)\n\n\(usage)\n".utf8))
  exit(2)
} catch {
  FileHandle.standardError.write(Data("mediacache-bench: \(error)\n".utf8))
  exit(1)
}
