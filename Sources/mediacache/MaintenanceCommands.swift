import ArgumentParser
import Foundation
import MediaCache

/// `mediacache purge`: evicts down to a size limit (placeholder, being written).
struct PurgeCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "purge", abstract: "Evicts objects down to a size.")
}

/// `mediacache stats`: counts of the cache's objects (placeholder, being written).
struct StatsCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "stats", abstract: "Counts the cache's objects.")
}
