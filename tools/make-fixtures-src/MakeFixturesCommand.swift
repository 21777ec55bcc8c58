// Writes the fsck fixture trees: one small cache per fault, each with the expectations written by hand in
// Cases.swift, and Fixtures/caches/README.md. Run it through `tools/make-fixtures`, which rewrites
// Fixtures/caches completely.
//
//   mediacache-fixtures OUTPUT_DIRECTORY     (the directory must not exist or be empty; exit status 2 if it is
//                                             not, on bad arguments or on an error)
//
// Everything is deterministic (fixed creation times, seeded bytes, no randomness, no clock): running it twice
// gives byte-identical trees, so a format change shows up as a diff of every affected fixture.
import ArgumentParser
import Foundation
import MediaCache

@main
struct MakeFixturesCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "mediacache-fixtures",
    abstract:
      "Writes the fsck fixture trees and their README.md to OUTPUT_DIRECTORY (run tools/make-fixtures).")

  @Argument(help: "Where to write (must not exist or be empty).") var output: String

  /// `main()`, but bad arguments exit 2 (ArgumentParser's status for them is 64), as they always have.
  static func main() {
    do {
      let command = try parse()
      command.run()
    } catch {
      if exitCode(for: error) == .validationFailure { fail(fullMessage(for: error)) }
      exit(withError: error)
    }
  }

  func validate() throws {
    if output.hasPrefix("-") {
      throw ValidationError("usage: mediacache-fixtures OUTPUT_DIRECTORY (must not exist or be empty)")
    }
  }

  func run() {
    if let existing = try? FileManager.default.contentsOfDirectory(atPath: output), !existing.isEmpty {
      fail("\(output) is not empty; tools/make-fixtures writes to a fresh directory")
    }

    // The reports' encoder (sorted keys, slashes as they are), pretty-printed for people reading the fixtures.
    let encoder = ReportJSON.encoder(pretty: true)
    let cases = allCases()
    do {
      try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
      for fixture in cases {
        let root = "\(output)/\(fixture.name)"
        let tree = try CaseTree(root: root)
        let expectations = try fixture.build(tree)
        try removeEmptyDirectories(under: root)
        let expected = Expected(
          name: fixture.name, exercises: fixture.exercises, agedNameMarker: "stale",
          check: expectations.check,
          repair: expectations.repair, recheck: expectations.recheck,
          untouchedByRepair: expectations.untouched.sorted())
        var json = try encoder.encode(expected)
        json.append(0x0A)
        try json.write(to: URL(fileURLWithPath: "\(root)/expected.json"))
      }
      try Data(readme(cases).utf8).write(to: URL(fileURLWithPath: "\(output)/README.md"))
    } catch {
      fail("\(error)")
    }
    print("wrote \(cases.count) fixtures to \(output)")
  }
}

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("mediacache-fixtures: \(message)\n".utf8))
  exit(2)
}

/// Removes empty directories under `path` (bottom-up), as a git checkout would not have them.
func removeEmptyDirectories(under path: String) throws {
  let manager = FileManager.default
  for name in try manager.contentsOfDirectory(atPath: path) {
    let child = "\(path)/\(name)"
    var isDirectory: ObjCBool = false
    guard manager.fileExists(atPath: child, isDirectory: &isDirectory), isDirectory.boolValue else {
      continue
    }
    try removeEmptyDirectories(under: child)
    if try manager.contentsOfDirectory(atPath: child).isEmpty { try manager.removeItem(atPath: child) }
  }
}

func readme(_ cases: [FixtureCase]) -> String {
  var text = """
    # Cache fixtures for cache-fsck

    Small cache trees (chunk size 4096), one per fault, written by `tools/make-fixtures` from the case \
    definitions in `tools/make-fixtures-src/Cases.swift`. Do not edit them by hand: change the generator and run \
    `tools/make-fixtures`, which rewrites this directory completely (the bytes are deterministic, so a format \
    change regenerates every tree and shows up in the diff).

    Each `<case>/` holds the cache tree itself beside `expected.json`: the findings (path, kind, severity, \
    chunk, action) and exit code a person expects from `cache-fsck --json` for a check, a `--repair`, and a \
    re-check after the repair, plus the files a repair must leave byte-identical. The expectations are \
    written by hand in the case definitions, never produced by running the checker. \
    `Tests/MediaCacheIntegrationTests/FsckTests.swift` copies each tree to a temporary directory before \
    running the real `cache-fsck` on it, so these files never change.

    Git keeps neither empty directories nor modification times, so the trees have no empty `objects/` or \
    `tmp/` (the checker does not need them), and the tests set times after copying: every file gets the \
    current time, and every file whose name contains `stale` is aged to 2 hours old (more than the 1 hour \
    grace period of `tmp/` and `.FORMAT.*` staging files).

    ## Cases


    """
  for fixture in cases { text += "- `\(fixture.name)`: \(fixture.exercises).\n" }
  return text
}
