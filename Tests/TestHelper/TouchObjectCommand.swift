import ArgumentParser
import MediaCache

/// `touch-object CACHE in-task|on-executor`: opens a cache through the I/O executor, then stamps an object's
/// recency (`ShardedStore.noteAccess`: a `utimensat` of its manifest, the only call it makes) in a Swift task,
/// or in a task that hands it to `IOExecutor.shared`; prints "touched". For the tests of
/// `MEDIACACHE_BLOCKING_CHECK`: it checks the calls that set a file's times too.
struct TouchObjectCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "touch-object",
    abstract: "Stamp an object's recency in a Swift task, or through the I/O executor.")

  @Argument var cache: String
  @Argument var place: OpenCacheCommand.Place

  func run() async throws {
    let (path, onExecutor) = (cache, place == .onExecutor)
    await Task.detached {
      do {
        let configuration = MediaCache.Configuration(directory: FilePath(path))
        let opened = try await IOExecutor.shared.run { try MediaCache(configuration: configuration) }
        let id = CacheKey("https://touch.example/object").objectID
        if onExecutor {
          try await IOExecutor.shared.run { opened.store.noteAccess(id) }
        } else {
          opened.store.noteAccess(id)
        }
        say("touched")
      } catch {
        die("\(error)")
      }
    }.value
  }
}
