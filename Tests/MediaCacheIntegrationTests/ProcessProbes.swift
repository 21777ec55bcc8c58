import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Whether process `pid` has a handler installed for `signal` (Linux: `SigCgt` in `/proc/PID/status`). Where
/// that cannot be read, waits a moment and answers yes.
func hasSignalHandler(_ pid: Int32, _ signal: Int32) -> Bool {
  #if os(Linux)
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
      let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
      let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16)
    else { return false }
    return mask & (1 << UInt64(signal - 1)) != 0
  #else
    usleep(100_000)
    return true
  #endif
}

/// Bytes process `pid` has read so far (`rchar` in `/proc/PID/io` on Linux; nil where unknown).
func bytesRead(by pid: Int32) -> Int? {
  #if os(Linux)
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix("rchar:") })
    else { return nil }
    return Int(line.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces))
  #else
    return nil
  #endif
}
