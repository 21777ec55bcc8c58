import ArgumentParser
import MediaCache

struct StatusCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "status", abstract: "Show how much of KEY-OR-URL is cached.",
    discussion: """
      Prints the state (none, partial or complete), the bytes cached and the cached ranges. A missing cache \
      directory shows none.

      Example: mediacache status --ignore-query Signature 'https://cdn.example.com/v.mp4?Signature=x'
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String
  @Flag(help: "Print JSON: state, cachedBytes, length, ranges as [start, endExclusive].") var json = false

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      let status = try await cache.openExisting()?.status(for: key) ?? MediaCache.Status.none
      if json { try printJSON(status) } else { printOut(status.humanLine) }
    }
  }
}
