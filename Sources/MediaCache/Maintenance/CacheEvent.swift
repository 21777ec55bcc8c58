import Foundation

/// Why an object left the cache.
public enum RemovalReason: String, Sendable, Codable, CodingKeyRepresentable, CaseIterable {
  /// Evicted to bring the cache under its size limit (or above its free-space floor).
  case size
  /// Not accessed for longer than the age limit.
  case age
  /// Removed by a call (`remove`, `removeAll`, `mediacache rm`/`clear`).
  case manual
  /// Its manifest could not be read.
  case corrupt
}

/// An object that was removed, as reported in events and compaction reports.
public struct RemovedObject: Sendable, Equatable {
  /// The removed object's id (its key is not stored in the cache).
  public var id: ObjectID
  /// The app's metadata from its manifest (empty if unreadable, and in a decoded report).
  public var userMetadata = Data()
  /// Bytes freed on disk.
  public var bytes: Int64
  /// Why it was removed.
  public var reason: RemovalReason

  /// A removed object (for an app's own events and tests).
  public init(id: ObjectID, userMetadata: Data = Data(), bytes: Int64, reason: RemovalReason) {
    self.id = id
    self.userMetadata = userMetadata
    self.bytes = bytes
    self.reason = reason
  }
}

/// In reports: `objectID` (64 lowercase hex digits), `bytes` and `reason`. The app's metadata is left out (it
/// is the app's, and may be large); decoding gives an empty one, and throws `DecodingError` when a key is
/// missing, the id is not 64 hex digits, or the reason is unknown.
extension RemovedObject: Codable {
  private enum CodingKeys: String, CodingKey {
    case id = "objectID"
    case bytes
    case reason
  }
}

/// Something the cache did that an app may want to know.
public enum CacheEvent: Sendable, Equatable {
  /// The bytes on disk passed the configured maximum; a compaction pass was started.
  case exceededMaxSize(bytes: Int64)
  /// Objects were removed.
  case removed([RemovedObject])
  /// The tails of objects were cut to free space, their heads kept (`CompactionPolicy.keepHeads`).
  case trimmed([TrimmedObject])
  /// Chunks of an object failed their CRC and were dropped; they will be fetched again.
  case chunksDropped(ObjectID, count: Int)
}

/// An object the compactor is about to evict, offered to the app's veto (`shouldEvict`).
public struct EvictionCandidate: Sendable {
  /// The candidate's id; the app identifies its own objects by `manifest?.userMetadata`.
  public var id: ObjectID
  /// Its manifest (pin flag, user metadata, validators).
  public var manifest: Manifest?
  /// Why it would be evicted.
  public var reason: RemovalReason
  /// Bytes it occupies.
  public var bytes: Int64
  /// Seconds since the epoch of its last access.
  public var lastAccess: Double
  /// Non-nil when only a tail would go: the first byte that would go (`CompactionPolicy.keepHeads`: the end of
  /// the kept head; ranges further on, such as an MP4's `moov` at its end, may be kept too).
  public var trimmedFrom: Int64?
}
