extension MediaCache {
  /// The limits a cache enforces, changeable while it runs (`setLimits(_:)`): the size, age and free-space
  /// limits of its compaction passes and the head window it keeps when it cuts tails.
  public struct Limits: Sendable, Equatable {
    /// Evict least recently used objects above this many bytes on disk (nil: no size limit).
    public var maxSize: Int64?
    /// Evict objects not accessed for this long (nil: no age limit).
    public var maxAge: Duration?
    /// Once over `maxSize`, evict down to this share of it, in (0, 1].
    public var lowWatermark: Double
    /// Keep at least this many bytes free on the file system (nil: no floor).
    public var minFree: Int64?
    /// Cut idle objects down to this window before evicting whole ones (nil: whole objects only).
    public var keepHeads: HeadWindow?

    /// Limits as given; the defaults are `Configuration`'s.
    public init(
      maxSize: Int64? = nil, maxAge: Duration? = .seconds(90 * 86400), lowWatermark: Double = 0.9,
      minFree: Int64? = nil, keepHeads: HeadWindow? = nil
    ) {
      self.maxSize = maxSize
      self.maxAge = maxAge
      self.lowWatermark = lowWatermark
      self.minFree = minFree
      self.keepHeads = keepHeads
    }

    /// The limits of `configuration`.
    init(_ configuration: Configuration) {
      self.init(
        maxSize: configuration.maxSize, maxAge: configuration.maxAge,
        lowWatermark: configuration.lowWatermark,
        minFree: configuration.minFree, keepHeads: configuration.keepHeads)
    }

    /// Throws `StoreError.invalidConfiguration` for a low watermark outside (0, 1] or a negative size.
    func validate() throws {
      guard lowWatermark > 0 && lowWatermark <= 1 else {
        throw StoreError.invalidConfiguration("low watermark \(lowWatermark) is outside (0, 1]")
      }
      if let maxSize, maxSize < 0 { throw StoreError.invalidConfiguration("maxSize \(maxSize) is negative") }
      if let minFree, minFree < 0 { throw StoreError.invalidConfiguration("minFree \(minFree) is negative") }
    }
  }

  /// The limits in force (those of `configuration` until `setLimits(_:)`).
  public var limits: Limits { tracking.withLock { $0.limits } }

  /// Changes the limits while the cache runs. They apply from the next write: one that finds the tracked total
  /// over a new `maxSize` starts a pass, as crossing it would; `purge()` applies them at once. Throws
  /// `StoreError.invalidConfiguration` (and changes nothing) for a low watermark outside (0, 1] or a negative
  /// size.
  public func setLimits(_ limits: Limits) throws {
    try limits.validate()
    tracking.withLock { $0.limits = limits }
  }

  /// Whether every byte of the object for `requested` is cached (on disk, or in memory): one manifest read, no
  /// tree walk.
  public func isCached(_ requested: String) async throws -> Bool {
    if case .complete = try await status(for: requested) { return true }
    return false
  }

  /// How many bytes of the object for `requested` are cached: one manifest read, no tree walk.
  public func cachedBytes(for requested: String) async throws -> Int64 {
    try await status(for: requested).cachedBytes
  }

  /// Bytes on disk as this process knows them, without a tree walk: the total the last compaction pass found
  /// (this process's, or, when the cache was opened, the one any process's pass recorded in the root's `usage`
  /// file: `cache-compactor` too), plus the chunks this process wrote since, less what it removed. Nil until a
  /// pass has run on the cache. Other processes' writes and evictions are seen at the next pass.
  public var approximateBytes: Int64? { tracking.withLock { $0.approximateBytes } }
}
