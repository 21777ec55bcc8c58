import Foundation

/// The `FORMAT` marker at a cache root: one line, `mediacache-format MAJOR.MINOR`, written once when the cache
/// is created. A cache whose major version differs from this build's is refused.
package enum CacheFormat {
  /// The layout's major version; a change means old readers must not touch the tree.
  package static let major = 1
  /// The layout's minor version; newer minors stay readable by this build.
  package static let minor = 1
  /// The marker's file name.
  package static let fileName = "FORMAT"
  /// The marker's contents as written by this build.
  package static var markerText: String { "mediacache-format \(major).\(minor)\n" }

  /// Parses a marker; returns (major, minor) or nil if it is not a marker at all.
  package static func parse(_ text: String) -> (major: Int, minor: Int)? {
    let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    let parts = line.split(separator: " ")
    guard parts.count == 2, parts[0] == "mediacache-format" else { return nil }
    let numbers = parts[1].split(separator: ".")
    guard numbers.count == 2, let major = Int(numbers[0]), let minor = Int(numbers[1]) else { return nil }
    return (major, minor)
  }

  /// A marker's first 40 characters as an error quotes them, on one line: control characters (its newline) as
  /// Swift escapes them.
  package static func quoted(_ text: String) -> String {
    String(
      text.prefix(40).unicodeScalars.map {
        $0.properties.generalCategory == .control ? $0.escaped(asASCII: true) : String($0)
      }.joined())
  }

  /// Writes this build's marker into `root`: staged as `.FORMAT.<pid>.<random>`, always fsynced (whatever the
  /// durability setting), renamed to `FORMAT`, then the root fsynced. Two processes doing it at once write the
  /// same text and the last rename wins. The only writer of the marker: a new cache (`ShardedStore`) and
  /// `cache-fsck --repair` both come here.
  static func writeMarker(root: String) throws {
    let staging = "\(root)/.FORMAT.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
    do {
      let file = try SystemFile(path: staging, writable: true, create: true)
      defer { file.close() }
      try Array(markerText.utf8).withUnsafeBytes { try file.write($0, at: 0) }
      try file.sync()
      try FileSystemCalls.renameFile(staging, to: "\(root)/\(fileName)")
    } catch {
      _ = try? FileSystemCalls.unlinkFile(staging)
      throw error
    }
    try FileSystemCalls.syncDirectory(root)
  }
}

/// How hard the store works to survive a power loss.
public enum Durability: String, Sendable, CaseIterable {
  /// Data is fsynced before the manifest that lists it, the manifest before its rename, and the directory after
  /// it: after a crash of the machine, a manifest lists only bytes that reached the disk.
  case durable
  /// No fsync. A crash of the process still loses nothing listed (the page cache keeps the data); a crash of the
  /// machine may lose recent chunks, which are then refetched (their CRCs fail and they are dropped).
  case relaxed
}
