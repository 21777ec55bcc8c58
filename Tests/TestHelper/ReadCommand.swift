import ArgumentParser
import Foundation
import MediaCache

/// `read CACHE KEY SOURCE`: reads the whole object again and again for --seconds; every byte must equal SOURCE
/// or the read must fail cleanly as not cached. Prints "reads=N misses=M" and exits 0, or "WRONG …" and exits 3.
struct ReadCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "read", abstract: "Read object KEY for --seconds, checking every byte against SOURCE.")

  @OptionGroup var object: ObjectArguments
  @Option var seconds: Double = 2

  func run() async throws {
    await dyingOnError {
      let source = try Data(contentsOf: URL(fileURLWithPath: object.source))
      let store = try ShardedStore(root: object.cache, chunkSize: 65536)
      let id = CacheKey(object.key).objectID
      var reads = 0
      var misses = 0
      let deadline = Date().addingTimeInterval(seconds)
      while Date() < deadline {
        do {
          let manager = try FileHandleAssetDataManager(store: store, id: id, writable: false)
          defer { try? manager.close() }
          var offset = 0
          for try await piece in manager.bytes(in: 0..<Int64(source.count)) {
            if piece != source[offset..<(offset + piece.count)] {
              say("WRONG bytes at offset \(offset)")
              Foundation.exit(3)
            }
            offset += piece.count
          }
          reads += 1
        } catch let error as StoreError where error.code == .notFound {
          misses += 1
        } catch let error as StoreError where error.code == .notCached {
          misses += 1
        }
      }
      say("reads=\(reads) misses=\(misses)")
    }
  }
}
