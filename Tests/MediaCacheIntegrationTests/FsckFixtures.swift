import Foundation
import MediaCache
import MediaCacheTestSupport
import Testing

@testable import cache_fsck

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `Fixtures/caches` in the source tree.
let cacheFixturesDirectory = URL(fileURLWithPath: #filePath)
  .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
  .appendingPathComponent("Fixtures/caches").path

/// The names of the fixture cases (the directories of `Fixtures/caches`), sorted.
let cacheFixtureNames: [String] = {
  let names = (try? FileManager.default.contentsOfDirectory(atPath: cacheFixturesDirectory)) ?? []
  return names.filter { name in
    var isDirectory: ObjCBool = false
    return FileManager.default.fileExists(
      atPath: "\(cacheFixturesDirectory)/\(name)", isDirectory: &isDirectory)
      && isDirectory.boolValue
  }.sorted()
}()

/// One finding as the tests compare it (what `expected.json` holds and what `cache-fsck --json` prints, minus
/// the message and the expected/found texts): the library's type, which the fixture generator writes too.
typealias FsckFinding = CheckFinding.Identity

/// Object counts, from `expected.json` or from the `totals` of `cache-fsck --json`.
struct FsckTotals: Codable, Hashable {
  var objects: Int
  var complete: Int
  var partial: Int
  var pinned: Int
}

/// One expected run of `cache-fsck`.
struct ExpectedFsckRun: Codable {
  var exitCode: Int32
  var findings: [FsckFinding]
  var totals: FsckTotals?
}

/// A fixture's `expected.json`.
struct FixtureExpectation: Codable {
  var name: String
  var exercises: String
  var agedNameMarker: String
  var check: ExpectedFsckRun
  var repair: ExpectedFsckRun
  var recheck: ExpectedFsckRun
  var untouchedByRepair: [String]

  init(fixture name: String) throws {
    let url = URL(fileURLWithPath: "\(cacheFixturesDirectory)/\(name)/expected.json")
    self = try ReportJSON.decode(FixtureExpectation.self, from: Data(contentsOf: url))
  }
}

/// What `cache-fsck --json` printed, decoded into the types cache-fsck encodes: its report (`FsckOutput`), or
/// the failure object it prints when the check cannot run (`FsckFailure`).
struct FsckReport {
  var status: Int32
  var output: FsckOutput?
  var failure: FsckFailure?
  var raw: String

  init(_ result: CommandResult) throws {
    status = result.status
    raw = result.text + result.stderr
    do {
      output = try ReportJSON.decode(FsckOutput.self, from: result.stdout)
    } catch {
      failure = try #require(
        try? ReportJSON.decode(FsckFailure.self, from: result.stdout),
        "cache-fsck printed neither a report (\(error)) nor a failure: \(raw)")
    }
  }

  /// The `exitCode` of either object.
  var exitCodeField: Int32? { output?.exitCode ?? failure?.exitCode }
  var findings: [FsckFinding] { output?.report.findings.map(\.identity) ?? [] }
  /// The totals (nil when cache-fsck printed a failure).
  var totals: CheckTotals? { output?.report.totals }

  var objectTotals: FsckTotals? {
    totals.map {
      FsckTotals(objects: $0.objects, complete: $0.complete, partial: $0.partial, pinned: $0.pinned)
    }
  }
}

/// Runs the real `cache-fsck` with `arguments`.
func fsck(_ arguments: [String]) async throws -> CommandResult {
  try await run(binary("cache-fsck"), arguments)
}

/// Runs `cache-fsck … --json` and parses what it printed.
func fsckJSON(_ arguments: [String]) async throws -> FsckReport {
  try await FsckReport(fsck(arguments + ["--json"]))
}

/// Copies fixture `name` (without its `expected.json`) to `destination` as fresh files, so every file's
/// modification time is now; then ages every file whose name contains `marker` to two hours old.
func copyFixture(_ name: String, to destination: String, agingNamesContaining marker: String = "stale") throws
{
  let source = "\(cacheFixturesDirectory)/\(name)"
  try copyTree(source, destination, skippingTopLevel: ["expected.json"])
  let old = Date().addingTimeInterval(-7200)
  for path in try allFiles(under: destination) where (path as NSString).lastPathComponent.contains(marker) {
    try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: "\(destination)/\(path)")
  }
}

private func copyTree(_ source: String, _ destination: String, skippingTopLevel skipped: Set<String> = [])
  throws
{
  let manager = FileManager.default
  try manager.createDirectory(
    atPath: destination, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
  for name in try manager.contentsOfDirectory(atPath: source) where !skipped.contains(name) {
    var isDirectory: ObjCBool = false
    _ = manager.fileExists(atPath: "\(source)/\(name)", isDirectory: &isDirectory)
    if isDirectory.boolValue {
      try copyTree("\(source)/\(name)", "\(destination)/\(name)")
    } else {
      let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(source)/\(name)"))
      guard
        manager.createFile(
          atPath: "\(destination)/\(name)", contents: bytes, attributes: [.posixPermissions: 0o600])
      else { throw CocoaError(.fileWriteUnknown) }
    }
  }
}
