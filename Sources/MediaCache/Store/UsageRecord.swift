import Foundation

/// `<root>/usage`: the bytes on disk the last complete compaction pass found, so that a process opening the
/// cache knows its total without a walk (`MediaCache.approximateBytes`). One line, `<bytes> <unix seconds>\n`,
/// replaced through `tmp/` by every pass that changed or could have changed something (not a dry run, not a
/// pass cut short). A hint: it is not flushed, and writes and removals since the pass are not in it.
extension ShardedStore {
  /// The file's name in the root.
  package static let usageFileName = "usage"

  private var usagePath: String { "\(root)/\(Self.usageFileName)" }

  /// Records `bytes` as the tree's total now.
  package func recordUsage(_ bytes: Int64, now: Double = Date().timeIntervalSince1970) throws {
    let staging = "\(tmpDirectory)/usage.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
    try mapIO {
      let file = try SystemFile(path: staging, writable: true, create: true)
      defer { file.close() }
      try Array("\(bytes) \(Int(now))\n".utf8).withUnsafeBytes { try file.write($0, at: 0) }
      try FileSystemCalls.renameFile(staging, to: usagePath)
    }
  }

  /// The total the last pass recorded and when (seconds since the epoch); nil if there is none or it does
  /// not parse.
  package func recordedUsage() -> (bytes: Int64, time: Double)? {
    guard let file = try? SystemFile(path: usagePath, writable: false) else { return nil }
    defer { file.close() }
    var buffer = [UInt8](repeating: 0, count: 64)
    guard let count = try? buffer.withUnsafeMutableBytes({ try file.read(into: $0, at: 0) }) else {
      return nil
    }
    let parts = String(decoding: buffer[..<count], as: UTF8.self).split(whereSeparator: {
      $0 == " " || $0 == "\n"
    })
    guard parts.count == 2, let bytes = Int64(parts[0]), bytes >= 0, let time = Double(parts[1]) else {
      return nil
    }
    return (bytes, time)
  }
}
