import ArgumentParser
import Foundation
import MediaCache

struct RemoveCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "rm", abstract: "Remove object KEY-OR-URL unless a process has it open.",
    discussion: """
      Exit status 2 if it is not cached, 3 if a process has it open (it stays).

      Example: mediacache rm https://cdn.example.com/v.mp4
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String

  func run() async throws {
    try await reportingErrors {
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
}
