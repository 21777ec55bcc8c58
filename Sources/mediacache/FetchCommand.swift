import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

struct FetchCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "fetch",
    abstract: "Cache URL (or one byte range of it) from the origin, fetching only what is missing.",
    discussion: """
      Shows a progress bar with bytes, rate and ETA on a terminal, plain lines otherwise. Exits 0 once the \
      range is cached; an interrupted fetch resumes where it stopped.
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: "The http or https URL.") var url: String
  @Option(help: "Inclusive byte range START-END (or START-).") var range: ByteRangeArgument?
  @Option(help: "Chunk size in bytes for a new object (default 1 MiB).") var chunkSize: Int = 1 << 20
  @Option(help: "durable (fsync data before each manifest commit) or relaxed.") var durability: Durability =
    .durable

  func run() async throws {
    try await reportingErrors {
      // Commit often enough that an interrupted fetch loses at most a second (or 32 MiB) of work, and seldom
      // enough that durable mode does not fsync more than it must.
      let mediaCache = try cache.open(
        chunkSize: chunkSize, durability: durability, commitPolicy: .init(bytes: 32 << 20, interval: 1))
      let client = OriginClient()
      let reader = CachingReader(cache: mediaCache, client: client)
      let requested: RequestedRange
      if let range {
        requested = range.end.map { .bounded(range.start..<($0 + 1)) } ?? .from(range.start)
      } else {
        requested = .all
      }
      let terminal = isatty(STDERR_FILENO) == 1
      var lastLine = Date.distantPast
      var last: PrefetchProgress?
      do {
        for try await progress in reader.prefetch(url, range: requested) {
          last = progress
          if terminal {
            FileHandle.standardError.write(Data(("\r" + Self.bar(progress)).utf8))
          } else if Date().timeIntervalSince(lastLine) >= 1 {
            lastLine = Date()
            FileHandle.standardError.write(Data((Self.line(progress) + "\n").utf8))
          }
        }
      } catch {
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
        try? await client.shutdown()
        if let originError = error as? OriginError { throw fail(originError.description, .failure) }
        throw error
      }
      try? await client.shutdown()
      if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
      let manifest = try await mediaCache.manifest(for: url)
      let wanted: Range<Int64>? = manifest?.contentLength.map { length in
        guard let range else { return 0..<length }
        return range.start..<min(length, (range.end ?? (length - 1)) + 1)
      }
      if let manifest, let wanted, !manifest.missingByteRanges(in: wanted).isEmpty {
        throw StoreError.notCached(manifest.objectID, missing: manifest.missingByteRanges(in: wanted))
      }
      let status = try await mediaCache.status(for: url)
      let fetched = last?.fetchedBytes ?? 0
      printOut("cached \(url): \(status.humanLine); fetched \(fetched) bytes from the origin")
    }
  }

  static func line(_ progress: PrefetchProgress) -> String {
    let percent =
      progress.totalBytes > 0 ? Double(progress.cachedBytes) * 100 / Double(progress.totalBytes) : 100
    return String(
      format: "%lld/%lld bytes (%.1f%%), %.1f MiB/s", progress.cachedBytes, progress.totalBytes, percent,
      progress.bytesPerSecond / 1_048_576)
  }

  static func bar(_ progress: PrefetchProgress) -> String {
    let share = progress.totalBytes > 0 ? Double(progress.cachedBytes) / Double(progress.totalBytes) : 1
    let width = 30
    let filled = Int(share * Double(width))
    let remaining = Double(max(0, progress.totalBytes - progress.cachedBytes))
    let eta = progress.bytesPerSecond > 0 ? remaining / progress.bytesPerSecond : 0
    return "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
      + line(progress) + String(format: ", ETA %.0f s ", eta)
  }
}

extension Durability: ExpressibleByArgument {}
