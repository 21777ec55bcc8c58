import Foundation

extension CacheChecker {
  // MARK: groups/

  /// Checks the group index (`GroupIndex.swift`) against the manifests of `ids`, the objects the walk found:
  /// every entry names an object whose manifest is in that group, and every object with a group has its entry.
  /// A repair removes stale entries and writes missing ones. Names the layout does not put there are warnings,
  /// left alone. `groupOf` holds the groups of the manifests the object checks read (a manifest that cannot
  /// be read names no group: its own finding comes from the object check), so no manifest is read again.
  func checkGroupIndex(_ ids: [ObjectID], groupOf: [ObjectID: String], _ report: inout CheckReport) {
    // A `groups` that is not a directory is a wrong-type finding of the root; it is not followed.
    guard (try? FileSystemCalls.status(store.groupsDirectory))??.isDirectory ?? true else { return }
    let known = Set(ids)
    var found: Set<String> = []
    for (relative, names) in (try? store.allGroupDirectories()) ?? [] {
      let parts = relative.split(separator: "/")
      guard let names, parts.count == 3, parts[2].count == 64, ObjectID(hex: parts[2]) != nil,
        parts[2].hasPrefix(parts[1])
      else {
        report.findings.append(
          CheckFinding(
            path: relative, kind: .unknownEntry, severity: .warning,
            message: "not a group directory (groups/gg/<64 hex>, a directory); left alone, not followed"))
        continue
      }
      for name in names.sorted() {
        let path = "\(relative)/\(name)"
        guard let id = ObjectID(hex: name) else {
          report.findings.append(
            CheckFinding(
              path: path, kind: .unknownEntry, severity: .warning, message: "not a group entry; left alone"))
          continue
        }
        if let group = groupOf[id], store.groupDirectories(group).directory == "\(rootPath)/\(relative)" {
          found.insert(path)
          continue
        }
        var finding = CheckFinding(
          path: path, kind: .staleGroupEntry, severity: .error,
          message: groupOf[id] == nil && !known.contains(id)
            ? "group entry for an object that is not in the cache"
            : "group entry for an object that is not in this group")
        if options.repair {
          finding.action =
            (try? FileSystemCalls.unlinkFile("\(rootPath)/\(path)")) != nil ? .repaired : .failed
          FileSystemCalls.removeEmptyDirectory("\(rootPath)/\(relative)")
        }
        report.findings.append(finding)
      }
    }
    for (id, group) in groupOf.sorted(by: { $0.key < $1.key }) {
      let directory = store.groupDirectories(group).directory
      let path = String(directory.dropFirst(rootPath.count + 1)) + "/\(id.hex)"
      guard !found.contains(path) else { continue }
      var finding = CheckFinding(
        path: path, kind: .missingGroupEntry, severity: .error,
        message: "object \(id.hex) is in group '\(group.prefix(80))' but the group index does not list it",
        expected: "an entry", found: "none")
      if options.repair {
        finding.action = (try? store.addGroupEntry(id, group: group)) != nil ? .repaired : .failed
      }
      report.findings.append(finding)
    }
  }
}
