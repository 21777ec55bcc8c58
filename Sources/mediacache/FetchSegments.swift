import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheStreaming
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension FetchCommand {
  /// Runs `body` with a reader over the cache made from this command's options (see `withCachingReader`).
  func withReader(_ body: (CachingReader) async throws -> Void) async throws {
    try await withCachingReader(
      cache: cache, origin: origin, chunkSize: chunkSize, durability: durability,
      requestLimits: requestLimits, body
    )
  }

  static func prefetchShowingProgress(_ uris: [String], prerequisites: Set<String>, reader: CachingReader)
    async throws -> HLSFetchProgress.Snapshot
  {
    let progress = HLSFetchProgress(total: uris.count)
    let terminal = isatty(STDERR_FILENO) == 1
    let display = Task {
      var lastLine = Date()
      while !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(200))
        let snapshot = progress.snapshot()
        if terminal {
          FileHandle.standardError.write(Data(("\r" + snapshot.bar).utf8))
        } else if Date().timeIntervalSince(lastLine) >= 1 {
          lastLine = Date()
          FileHandle.standardError.write(Data((snapshot.line + "\n").utf8))
        }
      }
    }
    do {
      try await prefetchAll(uris, prerequisites: prerequisites, reader: reader, progress: progress)
    } catch {
      display.cancel()
      if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
      throw error
    }
    display.cancel()
    let final = progress.snapshot()
    if terminal { FileHandle.standardError.write(Data(("\r" + final.bar + "\n").utf8)) }
    return final
  }

  /// Throws `StoreError.notCached` (with the missing ranges) for the first of `uris` not completely cached.
  static func requireComplete(_ uris: [String], reader: CachingReader) async throws {
    for uri in uris {
      guard case .complete = try await reader.cache.status(for: uri) else {
        let manifest = try await reader.cache.manifest(for: uri)
        throw StoreError.notCached(
          reader.cache.objectID(for: uri),
          missing: manifest?.missingByteRanges(in: 0..<Int64.max) ?? [0..<Int64.max])
      }
    }
  }

  /// Origin fetches running at once for `fetch --hls` (the reader's limiter caps requests at 6 anyway).
  static let parallelFetches = 4

  /// Prefetches every URI in order, up to `parallelFetches` segments at a time. A key or init section
  /// (`prerequisites`) is cached before any URI after it is started, so the segments that need it never come
  /// first. The first failure cancels the rest and is rethrown naming the URI.
  static func prefetchAll(
    _ uris: [String], prerequisites: Set<String>, reader: CachingReader, progress: HLSFetchProgress
  ) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
      var running = 0
      for (index, uri) in uris.enumerated() {
        if prerequisites.contains(uri) {
          // In this task, while the segments already started go on.
          try await prefetch(uri, index: index, of: uris.count, reader: reader, progress: progress)
          continue
        }
        if running == parallelFetches {
          _ = try await group.next()
          running -= 1
        }
        group.addTask {
          try await prefetch(uri, index: index, of: uris.count, reader: reader, progress: progress)
        }
        running += 1
      }
      try await group.waitForAll()
    }
  }

  /// Prefetches one whole URI, reporting to `progress` as file `index`.
  static func prefetch(
    _ uri: String, index: Int, of total: Int, reader: CachingReader, progress: HLSFetchProgress
  ) async throws {
    do {
      // What was cached before, so that the bytes fetched are counted even for a file so small that it is
      // complete before the prefetch reports anything.
      let before = try await reader.cache.manifest(for: uri)?.cachedBytes ?? 0
      progress.start(index, cachedBefore: before)
      for try await step in reader.prefetch(uri) { progress.update(index, cachedBytes: step.cachedBytes) }
      try Task.checkCancellation()
      progress.finish(index)
    } catch let error as OriginError {
      throw error  // names the URL already
    } catch is CancellationError {
      throw CancellationError()
    } catch {
      throw HLSFetchError(uri: uri, position: index + 1, total: total, underlying: error)
    }
  }

  /// The whole body of `url` read through the cache, refusing more than `limit` bytes without reading past
  /// them: a declared length over the limit, or a body that grows past it, throws `tooLarge(bytes)`.
  static func readWhole(
    _ url: String, limit: Int, reader: CachingReader, tooLarge: (Int) -> any Error
  ) async throws -> (body: Data, base: URL) {
    let bytes = try await reader.read(url)
    defer { bytes.close() }
    if let length = bytes.length, length > limit { throw tooLarge(Int(clamping: length)) }
    var body = Data()
    for try await piece in bytes {
      body.append(piece)
      if body.count > limit { throw tooLarge(body.count) }
    }
    // Relative references resolve against where a redirect led, as a player's do.
    guard let base = URL(string: bytes.responseURL ?? url) else { throw OriginError.invalidURL(url) }
    return (body, base)
  }
}

/// A file of an HLS set that could not be cached, for a reason other than the origin (those name the URL).
struct HLSFetchError: Error, CustomStringConvertible {
  var uri: String
  var position: Int
  var total: Int
  var underlying: any Error
  var description: String { "\(uri) (file \(position) of \(total)): \(underlying)" }
}

/// Progress of `fetch --hls` over the whole set: files done, bytes cached and fetched, origin rate.
final class HLSFetchProgress: Sendable {
  struct Snapshot {
    var done: Int
    var total: Int
    var cachedBytes: Int64
    var fetchedBytes: Int64
    var bytesPerSecond: Double

    var line: String {
      String(
        format: "%d/%d files, %lld bytes cached, %lld fetched, %.1f MiB/s", done, total, cachedBytes,
        fetchedBytes, bytesPerSecond / 1_048_576)
    }

    var bar: String {
      let width = 30
      let filled = total > 0 ? done * width / total : width
      return "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        + "] "
        + line + " "
    }
  }

  private struct State {
    var done = 0
    /// Per running file: bytes cached before it started, and now.
    var running: [Int: (before: Int64, now: Int64)] = [:]
    var finishedCached: Int64 = 0
    var finishedFetched: Int64 = 0
  }

  private let state = Mutex(State())
  private let total: Int
  private let started = Date()

  init(total: Int) { self.total = total }

  /// Notes that file `index` starts with `cachedBefore` bytes already cached.
  func start(_ index: Int, cachedBefore: Int64) {
    state.withLock { $0.running[index] = (cachedBefore, cachedBefore) }
  }

  /// Records how many bytes of file `index` are cached now.
  func update(_ index: Int, cachedBytes: Int64) {
    state.withLock { state in
      let before = state.running[index]?.before ?? 0
      state.running[index] = (before, max(before, cachedBytes))
    }
  }

  /// Marks file `index` as cached.
  func finish(_ index: Int) {
    state.withLock { state in
      guard let last = state.running.removeValue(forKey: index) else { return }
      state.done += 1
      state.finishedCached += last.now
      state.finishedFetched += last.now - last.before
    }
  }

  func snapshot() -> Snapshot {
    state.withLock { state in
      let running = state.running.values
      let fetched = state.finishedFetched + running.reduce(0) { $0 + ($1.now - $1.before) }
      let elapsed = max(Date().timeIntervalSince(started), 0.001)
      return Snapshot(
        done: state.done, total: total, cachedBytes: state.finishedCached + running.reduce(0) { $0 + $1.now },
        fetchedBytes: fetched, bytesPerSecond: Double(fetched) / elapsed)
    }
  }
}
