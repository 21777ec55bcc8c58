import ArgumentParser
import MediaCache

struct PinCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pin", abstract: "Pin object KEY-OR-URL so it is never evicted.",
    discussion: """
      Pinned objects are kept by purge, cache-compactor and in-process limits; rm and clear still remove \
      them. Exit status 2 if it is not cached.

      Example: mediacache pin https://cdn.example.com/intro.mp4
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String

  func run() async throws { try await cache.setPinned(true, key: key) }
}
