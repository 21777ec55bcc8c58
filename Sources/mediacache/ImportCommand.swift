import ArgumentParser
import Foundation
import MediaCache

struct ImportCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "import",
    abstract: "Write a file's bytes (or one byte range of it, at the same offsets) as object KEY-OR-URL.",
    discussion: """
      Without --range the object is replaced by the whole file. With --range only those bytes are added to \
      what is cached; --length declares the object's total length.

      With --group the object joins that group (`mediacache rm --group` removes a group's objects together).

      Example: mediacache import https://cdn.example.com/v.mp4 ./v.mp4 --content-type video/mp4
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String
  @Argument(help: "The file to read.", completion: .file()) var file: String
  @Option(help: "Inclusive byte range START-END (or START-) of FILE to import.") var range: ByteRangeArgument?
  @Option(help: "Total length of the object, for partial imports.") var length: Int64?
  @Option(help: "Content type to record.") var contentType: String?
  @Option(help: "Put the object in group G (any name: a file id, an account).") var group: String?
  @Option(help: "Chunk size in bytes for a new object (default 1 MiB).") var chunkSize: Int = 1 << 20

  func validate() throws { try validateGroupOption(group) }

  func run() async throws {
    try await reportingErrors(onIOExecutor: true) {
      let source: FileHandle
      do {
        source = try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
      } catch {
        throw fail("cannot read \(file): \((error as NSError).localizedDescription)", .failure)
      }
      defer { try? source.close() }
      let fileSize = Int64(try source.seekToEnd())
      let span: Range<Int64>
      if let range {
        guard let resolved = range.resolved(length: fileSize), resolved.upperBound <= fileSize else {
          throw fail(
            "range \(range.start)-\(range.end.map(String.init) ?? "") is outside \(file) (\(fileSize) bytes)",
            .failure)
        }
        span = resolved
      } else {
        if let length, length != fileSize {
          throw fail("--length \(length) differs from the size of \(file) (\(fileSize) bytes)", .failure)
        }
        span = 0..<fileSize
      }
      if let length, span.upperBound > length {
        throw fail("range ends at \(span.upperBound - 1), past --length \(length)", .failure)
      }
      let mediaCache = try cache.open(chunkSize: chunkSize)
      let manager = try mediaCache.assetDataManager(for: key)
      do {
        if range == nil {
          try manager.reset(contentLength: fileSize, etag: nil, lastModified: nil)
        } else if let length {
          try manager.setContentLength(length)
        }
        if let contentType { try manager.setContentType(contentType) }
        if let group { try manager.setGroup(group) }
        try copy(from: source, span: span, into: manager)
        try manager.close()
      } catch {
        try? manager.close()
        throw error
      }
      let status = try await mediaCache.status(for: key)
      printOut("imported \(span.count) bytes into \(mediaCache.objectID(for: key)): \(status.humanLine)")
    }
  }

  /// Copies `span` of `source` in 1 MiB pieces through one reused buffer.
  private func copy(from source: FileHandle, span: Range<Int64>, into manager: FileHandleAssetDataManager)
    throws
  {
    let pieceSize = 1 << 20
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: pieceSize, alignment: 16)
    defer { buffer.deallocate() }
    var offset = span.lowerBound
    while offset < span.upperBound {
      let want = Int(min(Int64(pieceSize), span.upperBound - offset))
      let got = pread(source.fileDescriptor, buffer.baseAddress, want, off_t(offset))
      if got < 0 {
        if errno == EINTR { continue }
        throw fail("cannot read \(file) at offset \(offset): \(String(cString: strerror(errno)))", .failure)
      }
      if got == 0 { throw fail("\(file) ended at \(offset), before \(span.upperBound)", .failure) }
      try manager.write(UnsafeRawBufferPointer(rebasing: buffer[..<got]), at: offset)
      offset += Int64(got)
    }
  }
}
