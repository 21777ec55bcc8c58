import ArgumentParser
import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// `write CACHE KEY SOURCE`: writes SOURCE as object KEY piece by piece, printing `wrote END` after each piece.
struct WriteCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "write", abstract: "Write SOURCE as object KEY, printing each piece written.")

  @OptionGroup var object: ObjectArguments
  @Option var chunkSize = 65536
  @Option var piece = 16384
  @Option(name: .customLong("delay-ms")) var delay: Double = 0
  @Option var commitBytes: Int64?
  /// `even` or `odd`: write only the chunks of that parity (any other value writes nothing).
  @Option var only: String?
  @Flag var durable = false

  func run() async throws {
    await dyingOnError {
      let source = try Data(contentsOf: URL(fileURLWithPath: object.source))
      let store = try ShardedStore(
        root: object.cache, chunkSize: chunkSize, durability: durable ? .durable : .relaxed)
      let manager = try FileHandleAssetDataManager(
        store: store, id: CacheKey(object.key).objectID,
        commitPolicy: .init(bytes: commitBytes ?? Int64(chunkSize), interval: .milliseconds(50)))
      try manager.setContentLength(Int64(source.count))
      say("opened")
      var offset = 0
      while offset < source.count {
        let end = min(source.count, offset + piece)
        let chunk = offset / chunkSize
        let wanted = only == nil || (only == "even" && chunk % 2 == 0) || (only == "odd" && chunk % 2 == 1)
        if wanted {
          try manager.write(source[offset..<end], at: Int64(offset))
          say("wrote \(end)")
          if delay > 0 { usleep(useconds_t(delay * 1000)) }
        }
        offset = end
      }
      try manager.close()
      say("done")
    }
  }
}
