import Foundation

/// The `FORMAT` marker at a cache root: one line, `mediacache-format MAJOR.MINOR`, written once when the cache
/// is created. A cache whose major version differs from this build's is refused.
public enum CacheFormat {
  /// The layout's major version; a change means old readers must not touch the tree.
  public static let major = 1
  /// The layout's minor version; newer minors stay readable by this build.
  public static let minor = 0
  /// The marker's file name.
  public static let fileName = "FORMAT"
  /// The marker's contents as written by this build.
  public static var markerText: String { "mediacache-format \(major).\(minor)\n" }

  /// Parses a marker; returns (major, minor) or nil if it is not a marker at all.
  public static func parse(_ text: String) -> (major: Int, minor: Int)? {
    let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    let parts = line.split(separator: " ")
    guard parts.count == 2, parts[0] == "mediacache-format" else { return nil }
    let numbers = parts[1].split(separator: ".")
    guard numbers.count == 2, let major = Int(numbers[0]), let minor = Int(numbers[1]) else { return nil }
    return (major, minor)
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
