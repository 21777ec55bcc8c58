import ArgumentParser
import MediaCache

struct InspectCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "inspect", abstract: "Show the manifest fields of KEY-OR-URL.",
    discussion: """
      Object id, state, length, chunk size and present chunks, validators, pin flag, bytes on disk and the \
      paths of the data file and manifest. Exit status 2 if the object is not cached.

      Example: mediacache inspect https://cdn.example.com/v.mp4 --json
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String
  @Flag(help: "Print JSON.") var json = false

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      let mediaCache = try cache.openExisting(for: key)
      let id = mediaCache.objectID(for: key)
      guard let manifest = try mediaCache.store.readManifest(id) else { throw StoreError.notFound(id) }
      let description = try ObjectDescription(manifest, store: mediaCache.store)
      if json {
        try printJSON(description)
      } else {
        for line in try description.humanLines() { printOut(line) }
      }
    }
  }
}
