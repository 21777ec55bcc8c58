import Foundation

/// The resident set size in bytes (VmRSS of /proc/PID/status) of process `pid` ("self": this process) on Linux;
/// nil where there is no /proc.
public func residentBytes(of pid: String = "self") -> Int? {
  guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
  for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    if fields.count >= 2, let kib = Int(fields[1]) { return kib * 1024 }
  }
  return nil
}

/// The resident set size in bytes of process `pid`, or nil.
public func residentBytes(pid: Int32) -> Int? { residentBytes(of: String(pid)) }
