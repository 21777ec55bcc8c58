// A second process for the integration tests: it writes and holds cache objects so that crashes
// (SIGKILL mid-write), concurrent writers and in-use locks are exercised across real processes.
//
//   mediacache-testhelper write CACHE KEY SOURCE [--chunk-size N] [--piece N] [--delay-ms N]
//                                                  [--durable] [--only even|odd] [--commit-bytes N]
//   mediacache-testhelper read CACHE KEY SOURCE [--seconds S]  (verifies every byte it reads)
//   mediacache-testhelper hold CACHE KEY     (prints "holding", waits for stdin to close, then exits)
//   mediacache-testhelper open-cache CACHE in-task|on-executor
//       opens a cache (creating its directories: blocking calls) in a Swift task, or in a task that hands the
//       open to `IOExecutor.shared`; prints "opened". For the tests of `MEDIACACHE_BLOCKING_CHECK`.
import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func option(_ name: String, in arguments: [String]) -> String? {
  guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
  return arguments[index + 1]
}

func die(_ message: String) -> Never {
  FileHandle.standardError.write(Data("mediacache-testhelper: \(message)\n".utf8))
  exit(2)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { die("usage: write|hold …") }

do {
  switch command {
  case "write":
    guard arguments.count >= 4 else { die("usage: write CACHE KEY SOURCE [options]") }
    let (cachePath, key, sourcePath) = (arguments[1], arguments[2], arguments[3])
    let chunkSize = Int(option("--chunk-size", in: arguments) ?? "") ?? 65536
    let piece = Int(option("--piece", in: arguments) ?? "") ?? 16384
    let delay = Double(option("--delay-ms", in: arguments) ?? "") ?? 0
    let commitBytes = Int64(option("--commit-bytes", in: arguments) ?? "") ?? Int64(chunkSize)
    let only = option("--only", in: arguments)
    let durability: Durability = arguments.contains("--durable") ? .durable : .relaxed
    let source = try Data(contentsOf: URL(fileURLWithPath: sourcePath))
    let store = try ShardedStore(root: cachePath, chunkSize: chunkSize, durability: durability)
    let manager = try FileHandleAssetDataManager(
      store: store, id: CacheKey(key).objectID,
      commitPolicy: .init(bytes: commitBytes, interval: 0.05))
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
  case "read":
    // Reads the whole object again and again for --seconds; every byte must equal SOURCE or the read must
    // fail cleanly as not cached. Prints "reads=N misses=M" and exits 0, or "WRONG …" and exits 3.
    guard arguments.count >= 4 else { die("usage: read CACHE KEY SOURCE [--seconds S]") }
    let source = try Data(contentsOf: URL(fileURLWithPath: arguments[3]))
    let seconds = Double(option("--seconds", in: arguments) ?? "") ?? 2
    let store = try ShardedStore(root: arguments[1], chunkSize: 65536)
    let id = CacheKey(arguments[2]).objectID
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
            exit(3)
          }
          offset += piece.count
        }
        reads += 1
      } catch StoreError.notFound {
        misses += 1
      } catch StoreError.notCached {
        misses += 1
      }
    }
    say("reads=\(reads) misses=\(misses)")
  case "hold":
    guard arguments.count >= 3 else { die("usage: hold CACHE KEY") }
    let store = try ShardedStore(root: arguments[1], chunkSize: 65536)
    let manager = try FileHandleAssetDataManager(
      store: store, id: CacheKey(arguments[2]).objectID, writable: false)
    say("holding")
    while readLine() != nil {}
    try manager.close()
    say("released")
  case "open-cache":
    guard arguments.count >= 3, ["in-task", "on-executor"].contains(arguments[2]) else {
      die("usage: open-cache CACHE in-task|on-executor")
    }
    let (path, onExecutor) = (arguments[1], arguments[2] == "on-executor")
    let done = DispatchSemaphore(value: 0)
    // Detached: a task of top-level code would run on the main actor, which `done.wait()` holds.
    Task.detached {
      do {
        let configuration = MediaCache.Configuration(directory: path)
        if onExecutor {
          _ = try await IOExecutor.shared.run { try MediaCache(configuration: configuration) }
        } else {
          _ = try MediaCache(configuration: configuration)
        }
        say("opened")
      } catch {
        die("\(error)")
      }
      done.signal()
    }
    done.wait()
  default:
    die("unknown command \(command)")
  }
} catch {
  die("\(error)")
}
