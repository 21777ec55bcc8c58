import ArgumentParser
import Foundation
import MediaCache

/// Help of the KEY-OR-URL argument the object commands take.
var keyOrURLHelp: ArgumentHelp {
  ArgumentHelp(
    "The cache key: usually the origin URL, which goes through --ignore-query.", valueName: "KEY-OR-URL")
}

struct ImportCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "import",
    abstract: "Write a file's bytes (or one byte range of it, at the same offsets) as object KEY-OR-URL.",
    discussion: """
      Without --range the object is replaced by the whole file. With --range only those bytes are added to \
      what is cached; --length declares the object's total length.

      Example: mediacache import https://cdn.example.com/v.mp4 ./v.mp4 --content-type video/mp4
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String
  @Argument(help: "The file to read.", completion: .file()) var file: String
  @Option(help: "Inclusive byte range START-END (or START-) of FILE to import.") var range: ByteRangeArgument?
  @Option(help: "Total length of the object, for partial imports.") var length: Int64?
  @Option(help: "Content type to record.") var contentType: String?
  @Option(help: "Chunk size in bytes for a new object (default 1 MiB).") var chunkSize: Int = 1 << 20

  func run() async throws {
    try await reportingErrors {
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
    try await reportingErrors {
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

struct StatusCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "status", abstract: "Show how much of KEY-OR-URL is cached.",
    discussion: """
      Prints the state (none, partial or complete), the bytes cached and the cached ranges. A missing cache \
      directory shows none.

      Example: mediacache status --ignore-query Signature 'https://cdn.example.com/v.mp4?Signature=x'
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String
  @Flag(help: "Print JSON: state, cachedBytes, length, ranges as [start, endExclusive].") var json = false

  func run() async throws {
    try await reportingErrors {
      let status = try await cache.openExisting()?.status(for: key) ?? MediaCache.Status.none
      if json { try printJSON(status) } else { printOut(status.humanLine) }
    }
  }
}

struct InspectCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "inspect", abstract: "Show the manifest fields of KEY-OR-URL.",
    discussion: """
      Object id, state, length, chunk size and present chunks, validators, pin flag, bytes on disk and the \
      paths of the data file and manifest. Exit status 2 if the object is not cached.

      Example: mediacache inspect https://cdn.example.com/v.mp4 --json
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String
  @Flag(help: "Print JSON.") var json = false

  func run() async throws {
    try await reportingErrors {
      let mediaCache = try cache.openExisting(for: key)
      let id = mediaCache.objectID(for: key)
      guard let manifest = try mediaCache.store.readManifest(id) else { throw StoreError.notFound(id) }
      let description = try ObjectDescription(manifest, store: mediaCache.store)
      if json {
        try printJSON(description)
      } else {
        for line in try description.humanLines() { printOut(line) }
      }
    }
  }
}

struct ListCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "ls", abstract: "List every cached object (walks the whole tree).",
    discussion: """
      One line per object: id, state, bytes cached, pinned. Keys are not stored, so objects are listed by id \
      (inspect KEY-OR-URL shows the id of a key). For totals, see stats.

      Example: mediacache ls --json
      """)

  @OptionGroup var cache: CacheOptions
  @Flag(help: "Print a JSON array.") var json = false

  func run() async throws {
    try await reportingErrors {
      guard let mediaCache = try cache.openExisting() else {
        if json { try printJSON([ListEntry]()) }
        return
      }
      var entries: [ListEntry] = []
      for id in try mediaCache.store.allObjectIDs() {
        do {
          guard let manifest = try mediaCache.store.readManifest(id) else {
            entries.append(ListEntry(objectID: id, state: "none", error: "no manifest"))
            if !json { printOut("\(id.hex)  none  (data file without manifest)") }
            continue
          }
          let status = MediaCache.status(of: manifest)
          entries.append(
            ListEntry(
              objectID: id, state: status.stateName, cachedBytes: status.cachedBytes,
              length: manifest.contentLength, pinned: manifest.isPinned,
              diskBytes: try mediaCache.store.diskUsage(id)))
          if !json {
            printOut("\(id.hex)  \(status.humanLine)\(manifest.isPinned ? "  pinned" : "")")
          }
        } catch let error as StoreError {
          entries.append(ListEntry(objectID: id, state: "unreadable", error: error.description))
          if !json { printOut("\(id.hex)  unreadable: \(error)") }
        }
      }
      if json { try printJSON(entries) }
    }
  }
}

struct RemoveCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "rm", abstract: "Remove object KEY-OR-URL unless a process has it open.",
    discussion: """
      Exit status 2 if it is not cached, 3 if a process has it open (it stays).

      Example: mediacache rm https://cdn.example.com/v.mp4
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String

  func run() async throws {
    try await reportingErrors {
      let mediaCache = try cache.openExisting(for: key)
      let id = mediaCache.objectID(for: key)
      guard
        try mediaCache.store.readManifest(id) != nil
          || FileManager.default.fileExists(atPath: mediaCache.store.paths(for: id).data)
      else { throw StoreError.notFound(id) }
      let freed = try await mediaCache.remove(key)
      printOut("removed \(id.hex), freed \(freed) bytes")
    }
  }
}

struct PinCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pin", abstract: "Pin object KEY-OR-URL so it is never evicted.",
    discussion: """
      Pinned objects are kept by purge, cache-compactor and in-process limits; rm and clear still remove \
      them. Exit status 2 if it is not cached.

      Example: mediacache pin https://cdn.example.com/intro.mp4
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String

  func run() async throws {
    try await reportingErrors {
      try await cache.openExisting(for: key).pin(key)
      printOut("pinned \(key)")
    }
  }
}

struct UnpinCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "unpin", abstract: "Unpin object KEY-OR-URL.",
    discussion: """
      The object becomes evictable again. Exit status 2 if it is not cached.

      Example: mediacache unpin https://cdn.example.com/intro.mp4
      """)

  @OptionGroup var cache: CacheOptions
  @Argument(help: keyOrURLHelp) var key: String

  func run() async throws {
    try await reportingErrors {
      try await cache.openExisting(for: key).unpin(key)
      printOut("unpinned \(key)")
    }
  }
}

struct ClearCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "clear",
    abstract: "Remove every object no process has open; print the bytes freed.",
    discussion: """
      Pinned objects are removed too. Objects in use are kept and listed; the exit status is then 3. To evict \
      down to a size instead, see purge.

      Example: mediacache clear --cache /var/cache/mediacache
      """)

  @OptionGroup var cache: CacheOptions

  func run() async throws {
    try await reportingErrors {
      guard let mediaCache = try cache.openExisting() else {
        printOut("freed 0 bytes (0 objects)")
        return
      }
      let report = try await mediaCache.removeAll()
      printOut("freed \(report.bytesFreed) bytes (\(report.objectsRemoved) objects)")
      if !report.busy.isEmpty {
        for id in report.busy { printOut("busy: \(id.hex) kept (in use)") }
        throw fail("\(report.busy.count) object(s) in use were kept", .busy)
      }
    }
  }
}
