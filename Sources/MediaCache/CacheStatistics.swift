import Foundation

/// Counts over every object on disk, from one walk of the shard tree (`stat` only) and a read of each manifest.
///
/// The memory tier is not counted. The numbers are a snapshot: objects written or removed while the walk runs
/// may or may not be included.
public struct CacheStatistics: Sendable, Equatable, Codable {
  /// Objects found: every id with a data file or a manifest (`complete + partial + empty + unreadable`).
  public var objects = 0
  /// Objects with every byte cached.
  public var complete = 0
  /// Objects with some bytes cached, not all (or with an unknown length).
  public var partial = 0
  /// Objects whose manifest lists no cached bytes.
  public var empty = 0
  /// Objects whose manifest is missing (a data file alone) or cannot be decoded; `cache-fsck` repairs them.
  public var unreadable = 0
  /// Objects pinned (never evicted).
  public var pinned = 0
  /// Bytes on disk: allocated blocks of the data files plus the manifests (what the size limit counts).
  public var diskBytes: Int64 = 0
  /// Content bytes cached: the bytes of the present chunks, summed over the objects.
  public var cachedBytes: Int64 = 0

  /// All zeros (an empty cache).
  public init() {}
}

extension ShardedStore {
  /// Walks the tree once (`scanObjects()`) and reads every manifest to count objects by state. Opens no data
  /// file and takes no lock, so it never blocks on, nor disturbs, readers and writers.
  ///
  /// A manifest that disappears between the walk and its read (the object was removed meanwhile) is left
  /// out of every count.
  package func statistics() throws -> CacheStatistics {
    var statistics = CacheStatistics()
    for object in try scanObjects() {
      let manifest: Manifest?
      do {
        manifest = try readManifest(object.id)
      } catch let error as StoreError where error.code == .corruptManifest {
        statistics.objects += 1
        statistics.unreadable += 1
        statistics.diskBytes += object.diskBytes
        continue
      }
      guard let manifest else {
        // A data file without a manifest is an orphan; a manifest that vanished was removed meanwhile.
        if object.manifestModified == nil {
          statistics.objects += 1
          statistics.unreadable += 1
          statistics.diskBytes += object.diskBytes
        }
        continue
      }
      statistics.objects += 1
      statistics.diskBytes += object.diskBytes
      if manifest.isPinned { statistics.pinned += 1 }
      let cached = manifest.cachedBytes
      statistics.cachedBytes += cached
      if manifest.isComplete {
        statistics.complete += 1
      } else if cached > 0 {
        statistics.partial += 1
      } else {
        statistics.empty += 1
      }
    }
    return statistics
  }
}

extension MediaCache {
  /// Counts of the objects on disk: by state, pinned, bytes on disk and content bytes cached. Walks the whole
  /// tree and reads every manifest, so it costs time in proportion to the number of objects; nothing is
  /// changed (recency stamps included).
  public func statistics() async throws -> CacheStatistics { try store.statistics() }
}
