import ArgumentParser
import MediaCache

struct UnpinCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "unpin", abstract: "Unpin object KEY-OR-URL.",
    discussion: """
      The object becomes evictable again. Exit status 2 if it is not cached.

      Example: mediacache unpin https://cdn.example.com/intro.mp4
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String

  func run() async throws { try await cache.setPinned(false, key: key) }
}
