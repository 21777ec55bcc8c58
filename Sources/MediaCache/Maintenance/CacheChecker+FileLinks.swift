import Foundation

extension CacheChecker {
  // MARK: files/

  /// `files/` holds links the checker never follows: anything but a symbolic link named `<64 hex>.<ext>` is an
  /// unknown-entry warning, left alone. (A link whose object is gone is left for the compactor.)
  func checkFileLinks(_ report: inout CheckReport) {
    for entry in (try? FileSystemCalls.scanDirectory("\(rootPath)/files")) ?? [] {
      let type = try? FileSystemCalls.fileType("\(rootPath)/files/\(entry.name)")
      if type != .symlink || ShardedStore.linkedObject(entry.name) == nil {
        report.findings.append(
          CheckFinding(
            path: "files/\(entry.name)", kind: .unknownEntry, severity: .warning,
            message: "not a link the cache makes; left alone"))
      }
    }
  }
}
