import Foundation
import Synchronization

/// The cache an app talks to: a memory tier for small assets over a sharded on-disk store of chunked objects.
///
/// Every method may be called from many tasks at once. Large objects are read and written by range through
/// `assetDataManager(for:)`; `store(_:for:)` and `data(for:)` are for objects that fit comfortably in memory.
public final class MediaCache: Sendable {
  /// Where and how a cache stores its objects.
  public struct Configuration: Sendable {
    /// The cache root: a path to the directory that holds `FORMAT`, `objects/` and `tmp/`.
    public var directory: FilePath
    /// Chunk size of new objects (default 1 MiB).
    public var chunkSize: Int
    /// Bytes the memory tier may hold (default 20 MiB).
    public var memoryCostLimit: Int
    /// Whether commits fsync (default `.durable`).
    public var durability: Durability
    /// Turns a requested string (usually a URL) into a cache key (default: as given).
    public var keyFunction: KeyFunction
    /// When written chunks are committed to the manifest.
    public var commitPolicy: FileHandleAssetDataManager.CommitPolicy
    /// Bytes on disk above which least recently used objects are evicted (default 1 GiB; nil: no limit).
    public var maxSize: Int64?
    /// Objects not accessed for this long are evicted (default 90 days; nil: no limit).
    public var maxAge: Duration?
    /// Once over `maxSize`, evict down to this share of it (default 0.9).
    public var lowWatermark: Double
    /// Keep at least this many bytes free on the file system (nil: no floor).
    public var minFree: Int64?
    /// To meet `maxSize` or `minFree`, first cut idle objects down to what this window keeps, then evict whole
    /// ones (`CompactionPolicy.keepHeads`; default nil: whole objects only).
    public var keepHeads: HeadWindow?
    /// The app's veto over evictions (like a keep-alive delegate): return false to keep an object.
    public var shouldEvict: (@Sendable (EvictionCandidate) -> Bool)?
    /// Create the directory if it does not exist (default). When false, a missing directory throws
    /// `StoreError.noSuchCache` and nothing is created.
    public var createDirectory = true
    /// Namespaces in the same directory, each with its own memory tier and disk limits (`namespace(_:)`); the
    /// limits above apply to the root's own objects only.
    public var namespaces: [Namespace] = []

    /// A configuration with the defaults above for whatever is not given: sizes are bytes. Nothing is checked
    /// here; `MediaCache.init(configuration:)` validates it.
    public init(
      directory: FilePath = Configuration.defaultDirectory(), chunkSize: Int = 1 << 20,
      memoryCostLimit: Int = 20 << 20, durability: Durability = .durable,
      keyFunction: KeyFunction = .identity,
      commitPolicy: FileHandleAssetDataManager.CommitPolicy = .init(), maxSize: Int64? = 1 << 30,
      maxAge: Duration? = .seconds(90 * 86400), lowWatermark: Double = 0.9, minFree: Int64? = nil,
      shouldEvict: (@Sendable (EvictionCandidate) -> Bool)? = nil
    ) {
      self.maxSize = maxSize
      self.maxAge = maxAge
      self.lowWatermark = lowWatermark
      self.minFree = minFree
      self.shouldEvict = shouldEvict
      self.directory = directory
      self.chunkSize = chunkSize
      self.memoryCostLimit = memoryCostLimit
      self.durability = durability
      self.keyFunction = keyFunction
      self.commitPolicy = commitPolicy
    }

    /// `$MEDIACACHE_DIR`, else on Apple platforms the app's `Library/Caches/MediaCache` (which backups leave
    /// out, and the system may empty when space runs low), elsewhere `$XDG_CACHE_HOME/mediacache`, else
    /// `~/.cache/mediacache`.
    public static func defaultDirectory(
      environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> FilePath {
      if let explicit = environment["MEDIACACHE_DIR"], !explicit.isEmpty { return FilePath(explicit) }
      #if canImport(Darwin)
        if let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first {
          return FilePath(caches.appendingPathComponent("MediaCache", isDirectory: true).path)
        }
      #endif
      if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty {
        return FilePath(xdg).appending("mediacache")
      }
      let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
      return FilePath(home).appending([".cache", "mediacache"])
    }
  }

  /// Which tiers a call uses.
  public enum StoragePolicy: Sendable, CaseIterable {
    /// Only the memory tier (lost when the process ends).
    case memoryOnly
    /// Only the disk.
    case diskOnly
    /// Both: disk for persistence, memory for speed (small assets such as images and animations).
    case memoryAndDisk

    var usesMemory: Bool { self != .diskOnly }
    var usesDisk: Bool { self != .memoryOnly }
  }

  /// How much of an object is cached on disk.
  public enum Status: Sendable, Equatable {
    /// Nothing.
    case none
    /// Some bytes: how many, the total length if known, and which ranges (half-open).
    case partial(cachedBytes: Int64, length: Int64?, ranges: [Range<Int64>])
    /// Every byte.
    case complete(length: Int64)

    /// Cached share of the length, 0...100 (0 when the length is unknown).
    public var percent: Double {
      switch self {
      case .none: 0
      case .complete: 100
      case .partial(let cached, let length, _):
        length.map { $0 == 0 ? 100 : Double(cached) * 100 / Double($0) } ?? 0
      }
    }
  }

  /// What `removeAll()` or `remove(group:)` did.
  public struct RemovalReport: Sendable, Equatable, Codable {
    /// Objects removed from disk.
    public var objectsRemoved: Int
    /// Bytes freed on disk (allocated blocks and manifests).
    public var bytesFreed: Int64
    /// Bytes released from the memory tier.
    public var memoryBytesFreed: Int64
    /// Objects left in place because a process had them open.
    public var busy: [ObjectID]
  }

  /// The configuration the cache was opened with.
  public let configuration: Configuration
  /// The on-disk store under `configuration.directory`, for range-level and maintenance work the facade does
  /// not wrap (its calls block: use it through `IOExecutor.shared`).
  package let store: ShardedStore
  /// The memory tier of whole small objects, limited to `configuration.memoryCostLimit` bytes.
  public let memory: MemoryTier
  /// Objects whose data manager this process is closing on the I/O executor: questions about one wait for it.
  package let closing = ClosingObjects()
  /// The configured namespaces' caches, by name.
  let namespaces: [String: MediaCache]

  struct Tracking {
    /// Bytes on disk as of the last pass plus chunks written since; nil until a pass has run (here, or in any
    /// process that recorded its total in `usage`).
    var approximateBytes: Int64?
    /// A pass has run in this process: until then a total read from `usage` is shown, but a write under a size
    /// limit still starts a pass to learn the total now (the file may be old, other processes may have written).
    var passHasRun = false
    var compactionRunning = false
    /// Chunk bytes written while a pass ran: its scan may have missed them, so they are added to its total.
    var writtenDuringPass: Int64 = 0
    /// The last pass ended with writes it may not have counted.
    var lastPassMissedWrites = false
    var subscribers: [UUID: AsyncStream<CacheEvent>.Continuation] = [:]
    /// The limits in force (`setLimits`).
    var limits = Limits()
  }

  let tracking = Mutex(Tracking())

  /// Opens (creating if needed) the cache in `configuration.directory`. Reads only the root, never the tree.
  ///
  /// Throws `StoreError.invalidConfiguration` for a low watermark outside (0, 1], a negative memory limit or a
  /// chunk size outside `Manifest.minChunkSize...Manifest.maxChunkSize`; `StoreError.notACache` for a
  /// non-empty directory without a `FORMAT` marker (each namespace's directory likewise; a bad or repeated
  /// namespace name is `invalidConfiguration`); `StoreError.unsupportedFormat` for another major format
  /// version; `StoreError.noSuchCache` for a missing directory when `createDirectory` is false; and
  /// `StoreError.io` when the directory cannot be created or read.
  public init(configuration: Configuration = Configuration()) throws {
    try Limits(configuration).validate()
    guard configuration.memoryCostLimit >= 0 else {
      throw StoreError.invalidConfiguration("memory cost limit \(configuration.memoryCostLimit) is negative")
    }
    try Self.validateNamespaces(configuration)
    self.configuration = configuration
    self.store = try ShardedStore(
      root: configuration.directory.string, chunkSize: configuration.chunkSize,
      durability: configuration.durability,
      create: configuration.createDirectory)
    self.memory = MemoryTier(costLimit: configuration.memoryCostLimit)
    self.namespaces = try Self.openNamespaces(configuration)
    let recorded = store.recordedUsage()?.bytes
    tracking.withLock {
      $0.limits = Limits(configuration)
      $0.approximateBytes = recorded
    }
    // Staging files a crashed writer left behind; `tmp/` is small, so this is no tree walk.
    _ = try? store.reapStaleTemporaryFiles(olderThan: Self.temporaryFileGracePeriod.seconds)
  }

  /// Age after which a file in `tmp/` is taken as left behind by a crashed writer (1 hour).
  public static let temporaryFileGracePeriod: Duration = .seconds(3600)

  /// The key `requested` is stored under (after the key function).
  public func key(for requested: String) -> CacheKey { configuration.keyFunction.key(for: requested) }

  /// The object id `requested` is stored under.
  public func objectID(for requested: String) -> ObjectID { key(for: requested).objectID }

  // MARK: Whole objects

  /// Stores `data` as the whole object for `requested`, replacing any earlier version. With `group`, the object
  /// joins that group on disk (`remove(group:)`); nil keeps the group it had. Throws `StoreError.invalidGroup`
  /// or `StoreError.fieldTooLarge` for a group name that cannot be used, before anything is written.
  public func store(
    _ data: Data, for requested: String, policy: StoragePolicy = .memoryAndDisk, contentType: String? = nil,
    userMetadata: Data? = nil, group: String? = nil
  ) async throws {
    let id = objectID(for: requested)
    if let group { try GroupName.validated(group) }
    if policy.usesDisk {
      try await IOExecutor.shared.run { [self] in
        do {
          try writeWholeObject(
            data, id: id, contentType: contentType, userMetadata: userMetadata, group: group)
        } catch let error as StoreError {
          // A full disk, and the app set limits: make room as the limits would, then try once more.
          guard error.code == .io, error.errno == .noSpace, try makeRoom(for: Int64(data.count)) > 0 else {
            throw error
          }
          try writeWholeObject(
            data, id: id, contentType: contentType, userMetadata: userMetadata, group: group)
        }
      }
    }
    if policy.usesMemory { memory.insert(data, for: id) } else { memory.remove(id) }
  }

  private func writeWholeObject(
    _ data: Data, id: ObjectID, contentType: String?, userMetadata: Data?, group: String?
  ) throws {
    let manager = try FileHandleAssetDataManager(
      store: store, id: id, writable: true, commitPolicy: configuration.commitPolicy, observer: observer)
    do {
      try manager.reset(contentLength: Int64(data.count), etag: nil, lastModified: nil)
      try manager.setContentType(contentType)
      if let userMetadata { try manager.setUserMetadata(userMetadata) }
      if let group { try manager.setGroup(group) }
      try manager.write(data, at: 0)
      try manager.close()
    } catch {
      try? manager.close()
      throw error
    }
  }

  /// After ENOSPC, when the app set limits (`maxSize` or `minFree`): evicts least recently used objects (never
  /// pinned, busy or vetoed ones) until `bytes` more fit under what is on disk now, and returns the bytes freed.
  /// Without limits the app did not ask for evictions: nothing is removed and 0 is returned. A writer that got
  /// ENOSPC calls this, then tries once more (`store`, and the origin fetches of `MediaCacheHTTP`).
  public func makeRoom(for bytes: Int64) throws -> Int64 {
    let limits = self.limits
    guard limits.maxSize != nil || limits.minFree != nil else { return 0 }
    let onDisk = try store.scanObjects().reduce(0) { $0 + $1.diskBytes }
    let pass = Compactor(
      store: store,
      policy: CompactionPolicy(
        maxSize: max(0, onDisk - bytes), lowWatermark: 1, maxAge: nil, minFree: nil,
        keepHeads: limits.keepHeads, tmpGracePeriod: Self.temporaryFileGracePeriod),
      shouldEvict: configuration.shouldEvict)
    let report = try pass.runPass()
    for object in report.removed { memory.remove(object.id) }
    adjustTrackedBytes(by: -report.bytesFreed)
    if !report.removed.isEmpty { emit(.removed(report.removed)) }
    if !report.trimmed.isEmpty { emit(.trimmed(report.trimmed)) }
    return report.bytesFreed
  }

  /// The whole object for `requested`: from memory, else from disk if complete there (promoted to memory when
  /// the policy allows and it fits), else nil. Every byte read from disk is CRC-verified; a corrupt chunk is
  /// dropped and `StoreError.corruptChunk` thrown.
  public func data(for requested: String, policy: StoragePolicy = .memoryAndDisk) async throws -> Data? {
    let id = objectID(for: requested)
    if policy.usesMemory, let data = memory.data(for: id) { return Self.noteHit(data) }
    guard policy.usesDisk else {
      CacheMetrics.noteMiss()
      return nil
    }
    await closing.wait(for: id)
    guard let data = try await IOExecutor.shared.run({ [self] in try diskData(id) }) else {
      CacheMetrics.noteMiss()
      return nil
    }
    if policy.usesMemory { memory.insert(data, for: id) }
    return Self.noteHit(data)
  }

  /// `data`, counted as a hit and as bytes served from the cache (`CacheMetrics`).
  private static func noteHit(_ data: Data) -> Data {
    CacheMetrics.noteRead(fromCache: Int64(data.count), fromOrigin: 0)
    CacheMetrics.noteServed(data.count, fromOrigin: false)
    return data
  }

  /// The whole object `id` from disk, if complete there (on the I/O executor).
  private func diskData(_ id: ObjectID) throws -> Data? {
    guard let manifest = try store.readManifest(id), manifest.isComplete, let length = manifest.contentLength
    else { return nil }
    let manager: FileHandleAssetDataManager
    do {
      manager = try FileHandleAssetDataManager(store: store, id: id, writable: false, observer: observer)
    } catch let error as StoreError where error.code == .notFound {
      return nil
    }
    defer { try? manager.close() }
    let data: Data
    do {
      data = try manager.read(0..<length)
    } catch let error as StoreError where error.code == .notCached {
      return nil  // evicted or reset between the manifest read and the open
    }
    return data
  }

  /// A file URL of a complete object, for APIs that want a file: without a copy, named with the extension of
  /// its content type (`files/<id>.mp4`, a symbolic link to the data file) when that type is a known media,
  /// playlist or image type, else the data file itself. Nil when the object is not complete on disk. The file
  /// may be evicted once no handle holds it open (the link then dangles until a compaction pass removes it);
  /// its bytes are not CRC-verified on this path.
  public func fileURL(for requested: String) async throws -> URL? {
    let id = objectID(for: requested)
    await closing.wait(for: id)
    return try await IOExecutor.shared.run { [store] () throws -> URL? in
      guard let manifest = try store.readManifest(id), manifest.isComplete else { return nil }
      guard let pathExtension = MediaFileExtension.forContentType(manifest.contentType) else {
        return URL(fileURLWithPath: store.paths(for: id).data)
      }
      return URL(fileURLWithPath: try store.fileLink(id, pathExtension: pathExtension))
    }
  }

  /// How much of the object is cached on disk (or `.complete` if it is held in memory only).
  public func status(for requested: String) async throws -> Status {
    let id = objectID(for: requested)
    await closing.wait(for: id)
    guard let manifest = try await IOExecutor.shared.run({ [store] in try store.readManifest(id) }) else {
      if let data = memory.data(for: id) { return .complete(length: Int64(data.count)) }
      return .none
    }
    return Self.status(of: manifest)
  }

  /// The status a manifest describes.
  public static func status(of manifest: Manifest) -> Status {
    if manifest.isComplete, let length = manifest.contentLength { return .complete(length: length) }
    let ranges = manifest.presentByteRanges
    if ranges.isEmpty { return .none }
    return .partial(cachedBytes: ranges.count, length: manifest.contentLength, ranges: ranges.ranges)
  }

  /// The committed manifest of the object, nil if it has none.
  public func manifest(for requested: String) async throws -> Manifest? {
    let id = objectID(for: requested)
    await closing.wait(for: id)
    return try await IOExecutor.shared.run { [store] in try store.readManifest(id) }
  }

  // MARK: Range access

  /// A data manager for reading and writing the object by range. Close it when done: while open, no process
  /// evicts the object.
  public func assetDataManager(for requested: String, writable: Bool = true) throws
    -> FileHandleAssetDataManager
  {
    try assetDataManager(for: requested, writable: writable, deferringCreation: false)
  }

  /// `assetDataManager(for:writable:)`; with `deferringCreation`, a new object's data file is made by its
  /// first write or commit, not by the open (see `FileHandleAssetDataManager.init`).
  package func assetDataManager(for requested: String, writable: Bool = true, deferringCreation: Bool) throws
    -> FileHandleAssetDataManager
  {
    // The observer counts written chunks, so range writes (origin fetches, the proxy) start compaction
    // passes when a size limit is set, like `store` does.
    try FileHandleAssetDataManager(
      store: store, id: objectID(for: requested), writable: writable,
      commitPolicy: configuration.commitPolicy,
      observer: observer, deferringCreation: deferringCreation)
  }

  /// Opens the object's data manager (`assetDataManager(for:writable:)`), runs `body` with it, and closes it —
  /// committing what it completed, releasing the in-use lock — whether `body` returns or throws (an error from
  /// `body` wins over one from closing). Blocks its caller on the disk: from async code, call it through
  /// `IOExecutor.shared.run`.
  public func withAssetData<Result>(
    for requested: String, writable: Bool = true, _ body: (FileHandleAssetDataManager) throws -> Result
  ) throws -> Result {
    try FileHandleAssetDataManager.using(assetDataManager(for: requested, writable: writable), body)
  }
}
