import Foundation

extension CacheChecker {
  // MARK: namespaces/

  /// Checks each namespace under `namespaces/` as the cache it is (`MediaCache.Namespace`), with the same
  /// options, and adds its findings (paths prefixed with `namespaces/<name>/`) and totals to `report`. An entry
  /// that cannot be a namespace is an unknown-entry warning (a non-directory with a namespace's name, a
  /// wrong-type error); none is ever followed or deleted.
  func checkNamespaces(now: Double, isCancelled: @Sendable () -> Bool, _ report: inout CheckReport) {
    let directory = "\(rootPath)/namespaces"
    guard (try? FileSystemCalls.status(directory))??.isDirectory == true else { return }
    for entry in ((try? FileSystemCalls.scanDirectory(directory)) ?? []).sorted(by: { $0.name < $1.name }) {
      let relative = "namespaces/\(entry.name)"
      guard (try? NamespaceName.validated(entry.name)) != nil else {
        report.findings.append(
          CheckFinding(
            path: relative, kind: .unknownEntry, severity: .warning,
            message: "not a namespace name (a-z0-9._-, at most 64); left alone"))
        continue
      }
      guard entry.status.isDirectory else {
        report.findings.append(
          wrongType(relative, expected: "directory", consequence: "the namespace cannot be used"))
        continue
      }
      if isCancelled() {
        report.cancelled = true
        return
      }
      let checker = CacheChecker(root: FilePath("\(rootPath)/\(relative)"), options: options)
      do {
        let sub = try checker.run(now: now, isCancelled: isCancelled)
        for var finding in sub.findings {
          finding.path = "\(relative)/\(finding.path)"
          report.findings.append(finding)
        }
        add(sub.totals, to: &report.totals)
        report.totals.busy += sub.totals.busy
        if sub.cancelled {
          report.cancelled = true
          return
        }
      } catch {
        report.findings.append(
          CheckFinding(
            path: relative, kind: .badFormatMarker, severity: .error,
            message: "the namespace cannot be checked: \(error)"))
      }
    }
  }
}
