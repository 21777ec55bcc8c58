import ArgumentParser
import Foundation
import MediaCache

struct CatCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "cat",
    abstract: "Write cached bytes of KEY-OR-URL to standard output.",
    discussion: """
      If any requested byte is not cached, nothing is written and the exit status is 2. Every chunk is \
      CRC-checked before its bytes are written; a corrupt chunk is dropped and ends the output with status 1. \
      Nothing is fetched from the origin (see fetch).

      Example: mediacache cat https://cdn.example.com/v.mp4 --range 0-1023 > head.bin
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String
  @Option(help: "Inclusive byte range START-END (or START-).") var range: ByteRangeArgument?

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      let mediaCache = try cache.openExisting(for: key)
      let manager = try mediaCache.assetDataManager(for: key, writable: false)
      defer { try? manager.close() }
      let manifest = manager.manifest
      let length = manifest.contentLength
      let wanted: Range<Int64>
      if let range {
        guard let resolved = range.resolved(length: length) else {
          throw StoreError.notCached(manifest.objectID, missing: [range.start..<Int64.max])
        }
        wanted = resolved
      } else {
        guard let length else {
          throw StoreError.notCached(
            manifest.objectID, missing: manifest.missingByteRanges(in: 0..<Int64.max))
        }
        wanted = 0..<length
      }
      if let length, wanted.upperBound > length {
        throw fail("range ends at \(wanted.upperBound - 1), past the object's length \(length)", .failure)
      }
      let missing = manifest.missingByteRanges(in: wanted)
      if !missing.isEmpty { throw StoreError.notCached(manifest.objectID, missing: missing) }
      for try await piece in manager.bytes(in: wanted) {
        FileHandle.standardOutput.write(piece)
      }
    }
  }
}
