import ArgumentParser
import MediaCache

/// `mediacache stats`: counts of the cache's objects.
struct StatsCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "stats",
    abstract: "Count the cache's objects: complete, partial, pinned, bytes on disk and bytes cached.",
    discussion: """
      Walks the whole tree and reads every manifest; changes nothing. "bytes on disk" is what --max-size \
      limits (allocated data blocks plus manifests); "cached" is the content bytes held. Unreadable objects \
      (a corrupt or missing manifest) are counted apart; cache-fsck repairs them. A missing cache directory \
      counts as empty.

      Example: mediacache stats --json
      """)

  @OptionGroup var cache: CacheOptions
  @Flag(
    help: """
      Print JSON: objects, complete, partial, empty, unreadable, pinned, diskBytes, cachedBytes.
      """)
  var json = false

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      let statistics = try await cache.openExisting()?.statistics() ?? CacheStatistics()
      if json { try printJSON(statistics) } else { printOut(Self.summary(statistics)) }
    }
  }

  static func summary(_ statistics: CacheStatistics) -> String {
    "\(statistics.objects) objects: \(statistics.complete) complete, \(statistics.partial) partial, "
      + "\(statistics.empty) empty, \(statistics.unreadable) unreadable; \(statistics.pinned) pinned; "
      + "\(statistics.cachedBytes) bytes cached, \(statistics.diskBytes) bytes on disk"
  }
}
