import ArgumentParser
import MediaCache

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

  @Option(
    help: ArgumentHelp(
      "Work in namespace NAME of the cache directory (its tree under namespaces/NAME).",
      discussion:
        "An app's MediaCache.Configuration.namespaces; cache-compactor --namespace sets its limits.",
      valueName: "NAME"))
  var namespace: String?

  func validate() throws {
    if let namespace {
      do { try NamespaceName.validated(namespace) } catch { throw ValidationError("--namespace: \(error)") }
    }
  }

  /// The cache directory asked for, else the default one; with `--namespace`, that namespace's tree in it.
  var resolvedDirectory: FilePath {
    let root = directory.map { FilePath($0) } ?? MediaCache.Configuration.defaultDirectory()
    return namespace.map { MediaCache.namespaceDirectory($0, root: root) } ?? root
  }

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
    } catch let error as StoreError where error.code == .noSuchCache {
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

  /// `pin` and `unpin`: sets the object's pin flag and says so; the object must be cached.
  func setPinned(_ pinned: Bool, key: String) async throws {
    try await reportingErrors(onIOExecutor: true) {
      let cache = try openExisting(for: key)
      if pinned { try await cache.pin(key) } else { try await cache.unpin(key) }
      printOut("\(pinned ? "pinned" : "unpinned") \(key)")
    }
  }
}
