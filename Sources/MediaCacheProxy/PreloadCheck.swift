import MediaCache
import MediaCacheHTTP

/// Checks the preloaded bytes no player got yet against the disk: another process (`cache-compactor`,
/// `mediacache rm`) may have removed or cut their objects without this process's cache events.
enum PreloadCheck {
  /// Reads the manifests of the objects `ledger` tracks (on the I/O executor) and settles what is gone.
  /// An object whose manifest cannot be read is left for the next check.
  static func settle(_ ledger: PreloadLedger, against cache: MediaCache) async {
    guard ledger.isTracking else { return }
    let objects = ledger.objectsWithUnplayedBytes()
    let store = cache.store
    let found = try? await IOExecutor.shared.run {
      objects.compactMap { object -> (ObjectID, UInt64, ByteRangeSet?)? in
        // No manifest: removed (a removal unlinks the manifest first). Unreadable: left for the next check.
        do {
          return (object.id, object.stamp, try store.readManifest(object.id)?.presentByteRanges)
        } catch {
          return nil
        }
      }
    }
    for (id, stamp, cached) in found ?? [] { ledger.settle(id, stillCached: cached, recordedBy: stamp) }
  }
}
