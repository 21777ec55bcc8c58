import Foundation
import MediaCache

/// The checks every crash class runs after a kill and after the restart.
struct Checks {
  let context: TrialContext
  let binaries: Binaries
  let log: CommandLog
  let root: String

  /// Audits every object (listed chunks against their CRC and the origin) and reports each problem as a
  /// failure. Returns the audits by object name.
  @discardableResult
  func auditAll(_ objects: [OriginObject], damaged: [String: Set<Int>] = [:], when: String) -> [String:
    ObjectAudit]
  {
    var audits: [String: ObjectAudit] = [:]
    for object in objects {
      let audit = auditObject(root: root, object, damaged: damaged[object.name] ?? [])
      for problem in audit.problems { context.fail("\(when): \(problem)") }
      context.tally.verified(audit.bytesVerified)
      context.tally.count("chunks verified", Int64(audit.goodChunks.count))
      audits[object.name] = audit
    }
    return audits
  }

  /// Runs `cache-fsck -n` (full check). Every error finding must be of a kind in `allowed` (and, for
  /// `chunk-crc`, on a chunk listed in `allowedChunks` when that is given); `requireClean` wants no errors at all.
  @discardableResult
  func fsckCheck(
    allowed: Set<String>, allowedChunkPaths: Set<String>? = nil, requireClean: Bool = false, when: String
  ) -> FsckResult? {
    // A process killed before it made the cache directory left nothing to check.
    guard fileExists(root) else {
      context.tally.count("checks of a cache not created yet")
      return nil
    }
    let result: FsckResult
    do {
      result = try runFsck(binaries, root, repair: false, log: log)
    } catch {
      context.fail("\(when): cannot run cache-fsck: \(error)")
      return nil
    }
    context.tally.count("fsck runs")
    if let parseError = result.parseError {
      context.fail("\(when): \(parseError)")
      return result
    }
    let errors = result.errors
    let unexpected = errors.filter { finding in
      if requireClean { return true }
      guard allowed.contains(finding.kind) else { return true }
      if finding.kind == "chunk-crc", let allowedChunkPaths, let chunk = finding.chunk {
        return !allowedChunkPaths.contains("\(finding.path)#\(chunk)")
      }
      return false
    }
    if !unexpected.isEmpty {
      context.fail(
        "\(when): cache-fsck -n reported \(unexpected.count) unexpected error(s): "
          + unexpected.prefix(5).map(\.description).joined(separator: "; "))
    }
    switch result.finished.outcome {
    case .exited(0): if !errors.isEmpty { context.fail("\(when): cache-fsck -n exited 0 with errors") }
    case .exited(4): if errors.isEmpty { context.fail("\(when): cache-fsck -n exited 4 without errors") }
    default: context.fail("\(when): \(result.finished.summary)")
    }
    return result
  }

  /// `mediacache cat` of `range` must print exactly the origin's bytes (exit 0).
  func catCheck(_ object: OriginObject, _ range: Range<Int64>?, when: String) {
    var arguments = ["cat", "--cache", root, object.url]
    if let range { arguments += ["--range", "\(range.lowerBound)-\(range.upperBound - 1)"] }
    guard let finished = try? runCommand(binaries.mediacache, arguments, log: log, tag: "cat", timeout: 120)
    else {
      context.fail("\(when): cannot run mediacache cat")
      return
    }
    guard finished.status == 0 else {
      context.fail("\(when): \(finished.summary)")
      return
    }
    let wanted = range ?? 0..<Int64(object.size)
    if let difference = compare(finished.stdout, object, wanted) {
      context.fail("\(when): mediacache cat: \(difference)")
    } else {
      context.tally.verified(Int64(wanted.count))
      context.tally.count("cat bytes verified", Int64(wanted.count))
    }
  }

  /// Scans every file of the cache for the URLs, paths and names used, and checks modes (0600 / 0700).
  func securityScan(_ objects: [OriginObject], ignoring: Set<String> = [], when: String) {
    let scan = scanForSecrets(root: root, needles: secretNeedles(objects), ignoring: ignoring)
    context.tally.count("files scanned for URLs", Int64(scan.filesScanned))
    for problem in scan.problems { context.fail("\(when): security scan: \(problem)") }
  }
}
