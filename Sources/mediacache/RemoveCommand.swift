import ArgumentParser
import Foundation
import MediaCache

struct RemoveCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "rm",
    abstract: "Remove object KEY-OR-URL, or every object of a group, unless a process has it open.",
    discussion: """
      Exit status 2 if nothing is cached (for --group: no object of the group), 3 if a process has it open (it \
      stays; with --group, the others are removed). --group finds the objects through the group index, \
      without walking the cache.

      Examples: mediacache rm https://cdn.example.com/v.mp4
                mediacache rm --group user-42
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String?
  @Option(help: "Remove every object of group G instead of one object.") var group: String?

  func validate() throws {
    guard (key == nil) != (group == nil) else {
      throw ValidationError("give KEY-OR-URL or --group, not both")
    }
    try validateGroupOption(group)
  }

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      if let group { return try await removeGroup(group) }
      guard let key else { return }
      let mediaCache = try cache.openExisting(for: key)
      let id = mediaCache.objectID(for: key)
      guard
        try mediaCache.store.readManifest(id) != nil
          || FileManager.default.fileExists(atPath: mediaCache.store.paths(for: id).data)
      else { throw StoreError.notFound(id) }
      let freed = try await mediaCache.remove(key)
      printOut("removed \(id.hex), freed \(freed) bytes")
    }
  }

  private func removeGroup(_ group: String) async throws {
    guard let mediaCache = try cache.openExisting() else {
      throw fail("group '\(group)' has no cached objects", .notCached)
    }
    let report = try await mediaCache.remove(group: group)
    printOut("removed \(report.objectsRemoved) objects of group '\(group)', freed \(report.bytesFreed) bytes")
    for id in report.busy { printOut("\(id.hex)  in use by a process: left in place") }
    if !report.busy.isEmpty { throw fail("\(report.busy.count) objects of the group are in use", .busy) }
    if report.objectsRemoved == 0 { throw fail("group '\(group)' has no cached objects", .notCached) }
  }
}
