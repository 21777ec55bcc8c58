import ArgumentParser
import Foundation
import MediaCache

@main
struct MediaCacheCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "mediacache",
    abstract: "Caches large media by byte range on local disk.",
    discussion: """
      Exit status: 0 success, 1 failure, 2 not cached, 3 object busy, 4 not a usable cache directory, \
      64 usage error.
      """,
    subcommands: [
      ProxyCommand.self, FetchCommand.self, StatusCommand.self, CatCommand.self, ImportCommand.self,
      InspectCommand.self, ListCommand.self,
      RemoveCommand.self, PinCommand.self, UnpinCommand.self, PurgeCommand.self, ClearCommand.self,
      StatsCommand.self,
    ])
}
