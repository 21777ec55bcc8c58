import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

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
