import ArgumentParser
import MediaCache

/// `hold CACHE KEY`: opens object KEY, prints "holding", waits for standard input to close, then releases it.
struct HoldCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "hold", abstract: "Hold object KEY open until standard input closes.")

  @Argument var cache: String
  @Argument var key: String

  func run() async throws {
    await dyingOnError {
      let store = try ShardedStore(root: cache, chunkSize: 65536)
      let manager = try FileHandleAssetDataManager(store: store, id: CacheKey(key).objectID, writable: false)
      say("holding")
      while readLine() != nil {}
      try manager.close()
      say("released")
    }
  }
}
