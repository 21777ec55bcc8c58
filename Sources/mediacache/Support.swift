import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP

/// Exit statuses of `mediacache`, documented in the README.
enum ExitStatus: Int32 {
  /// A failure not covered below (I/O error, bad file, corrupt data).
  case failure = 1
  /// The object, or some requested bytes of it, are not cached.
  case notCached = 2
  /// The object is open in another process and was left in place.
  case busy = 3
  /// The directory is not a cache, or a cache of an unsupported format (for `purge`, also: it does not exist).
  case badCache = 4
  /// The command line is wrong in a way only found while running (ArgumentParser's own usage errors are 64 too).
  case usage = 64
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

  @Option(
    name: .customLong("ignore-query"),
    help: ArgumentHelp(
      "Leave query item NAME out of cache keys (repeatable).",
      discussion: """
        Compared case-insensitively. Use it for the tokens a CDN adds to sign URLs, so that URLs signed \
        differently share one cached object: --ignore-query Expires --ignore-query Signature. Give the same \
        names to every command that uses the cache.
        """,
      valueName: "NAME"))
  var ignoredQueryItems: [String] = []

  /// The cache directory asked for, else the default one.
  var resolvedDirectory: String { directory ?? MediaCache.Configuration.defaultDirectory() }

  /// How requested URLs become cache keys: `--ignore-query` items dropped, else as given.
  var keyFunction: KeyFunction {
    ignoredQueryItems.isEmpty ? .identity : .removingQueryItems(Set(ignoredQueryItems))
  }

  /// The cache's configuration: this directory and key function, and no limits (a CLI command never evicts
  /// other objects as a side effect; eviction is purge's and the compactor's job).
  func configuration(
    chunkSize: Int = 1 << 20, durability: Durability = .durable,
    commitPolicy: FileHandleAssetDataManager.CommitPolicy = .init()
  ) -> MediaCache.Configuration {
    MediaCache.Configuration(
      directory: resolvedDirectory, chunkSize: chunkSize, durability: durability, keyFunction: keyFunction,
      commitPolicy: commitPolicy, maxSize: nil, maxAge: nil)
  }

  /// Opens the cache, creating the directory if needed (for commands that write).
  func open(
    chunkSize: Int = 1 << 20, durability: Durability = .durable,
    commitPolicy: FileHandleAssetDataManager.CommitPolicy = .init()
  ) throws -> MediaCache {
    try MediaCache(
      configuration: configuration(chunkSize: chunkSize, durability: durability, commitPolicy: commitPolicy))
  }

  /// `open` on the I/O executor, for commands that go on to run origin requests: the open's file-system calls
  /// do not hold a thread of the cooperative pool.
  func openOnExecutor(
    chunkSize: Int = 1 << 20, durability: Durability = .durable,
    commitPolicy: FileHandleAssetDataManager.CommitPolicy = .init()
  ) async throws -> MediaCache {
    let settings = configuration(chunkSize: chunkSize, durability: durability, commitPolicy: commitPolicy)
    return try await IOExecutor.shared.run { try MediaCache(configuration: settings) }
  }

  /// Opens an existing cache for commands that only look or remove; nil if the directory does not exist
  /// (nothing is created). `adjust` may change the configuration first (purge sets its limits).
  func openExisting(_ adjust: (inout MediaCache.Configuration) -> Void = { _ in }) throws -> MediaCache? {
    var configuration = configuration()
    configuration.createDirectory = false
    adjust(&configuration)
    do {
      return try MediaCache(configuration: configuration)
    } catch StoreError.noSuchCache {
      return nil
    }
  }

  /// Like `openExisting()`, but a missing directory means the object is not cached.
  func openExisting(for key: String) throws -> MediaCache {
    guard let cache = try openExisting() else {
      throw StoreError.notFound(keyFunction.key(for: key).objectID)
    }
    return cache
  }
}

/// A size in bytes: plain bytes (`1073741824`) or a number with a binary unit K, M, G or T (`512K`, `500M`,
/// `1.5G`, `1T`; case-insensitive, with an optional trailing `B` or `iB`).
struct ByteSizeArgument: ExpressibleByArgument, Equatable, CustomStringConvertible {
  /// The size in bytes.
  var bytes: Int64

  /// Why a size argument was refused; the description is shown after ArgumentParser's "invalid value" line.
  struct ParseError: Error, CustomStringConvertible {
    var text: String
    var reason: String
    var description: String {
      "'\(text)' is not a size: \(reason) (use bytes such as 1073741824, or 512K, 500M, 1.5G, 1T)"
    }
  }

  init(bytes: Int64) { self.bytes = bytes }

  init?(argument: String) {
    guard let parsed = try? Self.parse(argument) else { return nil }
    self = parsed
  }

  /// Parses `text`, throwing a `ParseError` that says what is wrong (for `@Option(transform:)`).
  static func parse(_ text: String) throws -> ByteSizeArgument {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    guard !trimmed.isEmpty else { throw ParseError(text: text, reason: "it is empty") }
    if trimmed.hasPrefix("-") { throw ParseError(text: text, reason: "a size cannot be negative") }
    // A decimal number (digits, at most one point) and at most a unit: refuses 1e9, 0x10, inf, nan.
    let number = trimmed.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
    let unit = trimmed.dropFirst(number.count).uppercased()
    guard number.contains(where: \.isNumber), number.filter({ $0 == "." }).count <= 1 else {
      throw ParseError(text: text, reason: "expected a number, then optionally a unit")
    }
    let prefixes = ["K", "M", "G", "T"]
    let units = Set(["", "B"] + prefixes + prefixes.map { $0 + "B" } + prefixes.map { $0 + "IB" })
    guard units.contains(unit) else {
      throw ParseError(text: text, reason: "unknown unit '\(trimmed.dropFirst(number.count))'")
    }
    guard let bytes = HumanUnits.parseSize(trimmed) else {
      throw ParseError(
        text: text,
        reason: unit.isEmpty || unit == "B" ? "plain bytes must be a whole number" : "it is too large")
    }
    return ByteSizeArgument(bytes: bytes)
  }

  var description: String { "\(bytes) bytes" }

  static var defaultCompletionKind: CompletionKind { .default }
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

/// Trust options of the commands that fetch from origins.
struct TLSOptions: ParsableArguments {
  @Option(
    name: .customLong("ca-file"),
    help: ArgumentHelp(
      "Also trust the certificates in this PEM file for HTTPS origins (repeatable).",
      discussion: """
        Added to the system's trust roots: a private CA, or a self-signed origin's own certificate. \
        $SSL_CERT_FILE (a PEM bundle) and $SSL_CERT_DIR (colon-separated directories of PEM files) are read \
        too, as curl and OpenSSL read them. A file that is missing or holds no certificate stops the command \
        at start.
        """,
      valueName: "PEM"),
    completion: .file())
  var caFiles: [String] = []

  /// An origin client with these trust roots; throws `OriginError.invalidTrustRoots` naming a file that
  /// cannot be used.
  func client(_ configuration: OriginClient.Configuration = .init()) throws -> OriginClient {
    var configuration = configuration
    configuration.caFiles = caFiles
    return try OriginClient(checking: configuration)
  }
}
