import ArgumentParser
import Foundation
import MediaCache

@main
struct MediaCacheCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "mediacache",
    abstract: "Caches large media by byte range on local disk.",
    discussion: """
      Objects are named by their origin URL (or any key); --ignore-query NAME leaves signing tokens out of \
      keys so that re-signed URLs find what is cached. The cache directory is --cache, else $MEDIACACHE_DIR, \
      else $XDG_CACHE_HOME/mediacache, else ~/.cache/mediacache.

      Exit status: 0 success, 1 failure, 2 not cached, 3 object busy, 4 not a usable cache directory, \
      64 usage error.

      Examples:
        mediacache fetch https://cdn.example.com/v.mp4
        mediacache fetch --hls https://cdn.example.com/show/master.m3u8
        mediacache status https://cdn.example.com/v.mp4
        mediacache purge --max-size 2G
      """,
    subcommands: [
      ProxyCommand.self, FetchCommand.self, PreloadCommand.self, StatusCommand.self, CatCommand.self,
      ImportCommand.self,
      InspectCommand.self, ListCommand.self,
      RemoveCommand.self, PinCommand.self, UnpinCommand.self, PurgeCommand.self, ClearCommand.self,
      StatsCommand.self,
    ])

  /// Parses the arguments and runs the command. The proxy's allocator settings (`ProxyAllocator.tune`)
  /// are made here, on the main thread before the first `await`: by `run()` a thread of Swift's pool already
  /// runs, and glibc has given it an arena of its own that `M_ARENA_MAX` no longer takes back.
  @MainActor static func main() async {
    if CommandLine.arguments.dropFirst().first == ProxyCommand.configuration.commandName {
      ProxyAllocator.tune()
    }
    await main(nil)
  }
}
