import Foundation
import MediaCache

// How `mediacache` writes to standard output: plain lines, one line of JSON per --json report (through
// `ReportJSON`; the schemas are in docs/REPORTS.md), and the one-line form of an object's status.

/// Writes to standard output, unbuffered.
func printOut(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Prints `value` as one line of JSON.
func printJSON(_ value: some Encodable) throws {
  printOut(try ReportJSON.encode(value))
}

extension MediaCache.Status {
  var humanLine: String {
    switch self {
    case .none: return "none"
    case .complete(let length): return "complete \(length) bytes"
    case .partial(let cached, let length, let ranges):
      let share = length.map { String(format: " (%.1f%% of %lld)", percent, $0) } ?? " (length unknown)"
      let list = ranges.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
      return "partial \(cached) bytes\(share) ranges \(list)"
    }
  }
}
