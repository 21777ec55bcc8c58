import ArgumentParser
import Foundation
import MediaCache

/// Exit statuses of `mediacache`, documented in the README.
enum ExitStatus: Int32 {
  /// A failure not covered below (I/O error, bad file, corrupt data).
  case failure = 1
  /// The object, or some requested bytes of it, are not cached.
  case notCached = 2
  /// The object is open in another process and was left in place.
  case busy = 3
  /// The directory is not a cache, or a cache of an unsupported format.
  case badCache = 4
}

/// Options every subcommand takes.
struct CacheOptions: ParsableArguments {
  @Option(
    name: .customLong("cache"),
    help: ArgumentHelp(
      "Cache directory.",
      discussion: "Default: $MEDIACACHE_DIR, else $XDG_CACHE_HOME/mediacache, else ~/.cache/mediacache."),
    completion: .directory)
  var directory: String?

  /// Opens the cache, creating the directory if needed (for commands that write).
  func open(
    chunkSize: Int = 1 << 20, durability: Durability = .durable,
    commitPolicy: FileHandleAssetDataManager.CommitPolicy = .init()
  ) throws -> MediaCache {
    // Limits are the compactor's job: a CLI command never evicts other objects as a side effect.
    let configuration = MediaCache.Configuration(
      directory: directory ?? MediaCache.Configuration.defaultDirectory(), chunkSize: chunkSize,
      durability: durability, commitPolicy: commitPolicy, maxSize: nil, maxAge: nil)
    return try MediaCache(configuration: configuration)
  }

  /// Opens an existing cache for commands that only look or remove; nil if the directory does not exist
  /// (nothing is created).
  func openExisting() throws -> MediaCache? {
    var configuration = MediaCache.Configuration(
      directory: directory ?? MediaCache.Configuration.defaultDirectory())
    configuration.createDirectory = false
    do {
      return try MediaCache(configuration: configuration)
    } catch StoreError.noSuchCache {
      return nil
    }
  }

  /// Like `openExisting()`, but a missing directory means the object is not cached.
  func openExisting(for key: String) throws -> MediaCache {
    guard let cache = try openExisting() else { throw StoreError.notFound(CacheKey(key).objectID) }
    return cache
  }
}

/// An inclusive byte range `START-END`, or `START-` for the rest of the object.
struct ByteRangeArgument: ExpressibleByArgument {
  var start: Int64
  var end: Int64?

  init?(argument: String) {
    let parts = argument.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, let start = Int64(parts[0]), start >= 0 else { return nil }
    self.start = start
    if parts[1].isEmpty {
      end = nil
    } else {
      guard let end = Int64(parts[1]), end >= start else { return nil }
      self.end = end
    }
  }

  /// The half-open range, with an open end resolved against `length`.
  func resolved(length: Int64?) -> Range<Int64>? {
    if let end { return start..<(end + 1) }
    guard let length else { return nil }
    return start..<max(start, length)
  }

  static var defaultCompletionKind: CompletionKind { .default }
}

/// Prints `message` as one line on standard error and exits with `status`.
func fail(_ message: String, _ status: ExitStatus) -> ExitCode {
  FileHandle.standardError.write(Data("mediacache: \(message)\n".utf8))
  return ExitCode(status.rawValue)
}

/// Runs a subcommand body, turning library errors into one line on standard error and an exit status.
func reportingErrors(_ body: () async throws -> Void) async throws {
  do {
    try await body()
  } catch let error as StoreError {
    switch error {
    case .notFound, .notCached, .noSuchCache: throw fail(error.description, .notCached)
    case .busy: throw fail(error.description, .busy)
    case .notACache, .unsupportedFormat: throw fail(error.description, .badCache)
    default: throw fail(error.description, .failure)
    }
  } catch let error as ExitCode {
    throw error
  } catch let error as CleanExit {
    throw error
  } catch let error as ValidationError {
    throw error
  } catch {
    throw fail("\(error)", .failure)
  }
}

extension MediaCache.Status {
  var stateName: String {
    switch self {
    case .none: "none"
    case .partial: "partial"
    case .complete: "complete"
    }
  }

  var cachedBytes: Int64 {
    switch self {
    case .none: 0
    case .partial(let cached, _, _): cached
    case .complete(let length): length
    }
  }

  var length: Int64? {
    switch self {
    case .none: nil
    case .partial(_, let length, _): length
    case .complete(let length): length
    }
  }

  var ranges: [Range<Int64>] {
    switch self {
    case .none: []
    case .partial(_, _, let ranges): ranges
    case .complete(let length): length > 0 ? [0..<length] : []
    }
  }

  var json: JSONValue {
    .object([
      ("state", .string(stateName)),
      ("cachedBytes", .int(cachedBytes)),
      ("length", .optional(length)),
      ("ranges", .array(ranges.map { .array([.int($0.lowerBound), .int($0.upperBound)]) })),
    ])
  }

  var humanLine: String {
    switch self {
    case .none: return "none"
    case .complete(let length): return "complete \(length) bytes"
    case .partial(let cached, let length, let ranges):
      let share = length.map { String(format: " (%.1f%% of %lld)", percent, $0) } ?? " (length unknown)"
      let list = ranges.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
      return "partial \(cached) bytes\(share) ranges \(list)"
    }
  }
}

/// Writes to standard output, unbuffered.
func printOut(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
