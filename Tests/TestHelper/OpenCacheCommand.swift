import ArgumentParser
import MediaCache

/// `open-cache CACHE in-task|on-executor`: opens a cache (creating its directories: blocking calls) in a Swift
/// task, or in a task that hands the open to `IOExecutor.shared`; prints "opened". For the tests of
/// `MEDIACACHE_BLOCKING_CHECK`.
struct OpenCacheCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "open-cache", abstract: "Open a cache in a Swift task, or through the I/O executor.")

  enum Place: String, ExpressibleByArgument {
    case inTask = "in-task"
    case onExecutor = "on-executor"
  }

  @Argument var cache: String
  @Argument var place: Place

  func run() async throws {
    let (path, onExecutor) = (cache, place == .onExecutor)
    // Detached, so the open runs in a task of its own on the cooperative pool, as it did from top-level code.
    await Task.detached {
      do {
        let configuration = MediaCache.Configuration(directory: FilePath(path))
        if onExecutor {
          _ = try await IOExecutor.shared.run { try MediaCache(configuration: configuration) }
        } else {
          _ = try MediaCache(configuration: configuration)
        }
        say("opened")
      } catch {
        die("\(error)")
      }
    }.value
  }
}
