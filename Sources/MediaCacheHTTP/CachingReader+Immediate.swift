import Foundation
import MediaCache
import NIOCore

/// A range served wholly from the cache by `CachingReader.readCachedNow`: its bytes, read and checked, and
/// what the cache recorded of the object.
package struct CachedRange: Sendable {
  /// The object's id.
  package var objectID: ObjectID
  /// The range's bytes (the readable bytes; the buffer may hold more around them).
  package var buffer: ByteBuffer
  /// The absolute bytes served.
  package var range: Range<Int64>
  /// The object's length.
  package var length: Int64
  /// What the cache recorded from the origin.
  package var contentType: String?
  /// The origin's entity tag, as recorded.
  package var etag: String?
  /// The origin's `Last-Modified` value, as recorded.
  package var lastModified: String?
  /// The origin response's end-to-end fields, as stored.
  package var storedHeaders: StoredHeaders?
  /// The response's age and freshness when read (nil: none recorded).
  package var freshness: ObjectFreshness?
}

extension CachingReader {
  /// The most bytes `readCachedNow(_:range:maxBytes:waitingForDisk: false)` reads and checks: a range of up to
  /// 2 MiB in 1 MiB chunks read whole (three chunks) fits.
  package static let residentReadMaxBytes = 4 << 20

  /// The bytes of `range` of the object at `url` when they can be given at once: the object is open in this
  /// reader now (another read or flight has it), its length is known, every byte of the range is cached (in
  /// complete chunks, or in spans of incomplete ones), and the range is at most `maxBytes`. They are read and
  /// checked as `read` reads them (the same verified read, the same access time noted) in one buffer, on the
  /// calling thread, which must be an `IOExecutor`'s (anywhere else this returns nil: it makes blocking calls).
  /// Unless `waitingForDisk` is false: then it makes no blocking call and may run on any thread (an event loop),
  /// and returns nil as well when a byte it needs is not in the page cache
  /// (`FileHandleAssetDataManager.readVerifiedIfResident`), or when the read would be longer than
  /// `residentReadMaxBytes` (whole large chunks not yet verified: a loop must not copy and check tens of
  /// megabytes while its other connections wait).
  ///
  /// Nil means "not now", never an error: `read` then does whatever is needed (a fetch, a corrupt chunk
  /// dropped and fetched again, a range not satisfiable). This is the proxy's path for a hit under load: no
  /// task, sequence or cursor per request, no hop between threads. `objectID`, when given, must be
  /// `cache.objectID(for: url)` (a caller that remembers it saves the hash). `declining` is asked about the
  /// object's content type before anything is read: true returns nil (a proxy answers playlists otherwise), so
  /// a hit counted in the cache's metrics is always a hit given. A caller that counts the read itself later
  /// (`counting` false: an event loop counts its hit once the response is handed to NIO) calls
  /// `countCachedRead(_:)` with the range's bytes.
  package func readCachedNow(
    _ url: String, objectID: ObjectID? = nil, range: RequestedRange, maxBytes: Int,
    waitingForDisk: Bool = true, counting: Bool = true,
    declining: (_ contentType: String?) -> Bool = { _ in false }
  ) -> CachedRange? {
    // (No check of the URL: only `read`, which checks it, opens sessions.)
    guard !waitingForDisk || IOExecutor.isCurrentThreadIO,
      let session = registry.sessionIfOpen(objectID ?? cache.objectID(for: url))
    else { return nil }
    defer { session.endRead() }
    let manager = session.manager
    let manifest = manager.manifest
    // Stale bytes are not served from here: `read` revalidates them first.
    let freshness = session.freshness(of: manifest)
    let now = Date()
    guard freshness.map({ $0.isFresh(at: now) }) ?? true, !declining(manifest.contentType),
      let bounds = Self.cachedBounds(of: range, in: manifest, maxBytes: maxBytes),
      let length = manifest.contentLength,
      let plan = try? manager.planVerifiedRead(bounds, readingManifest: waitingForDisk),
      waitingForDisk || plan.extent.count <= Self.residentReadMaxBytes,
      let buffer = try? session.environment.bufferPool.readVerified(
        plan, from: manager, minimumCapacity: manager.wholeChunkExtent(of: bounds).count,
        onlyIfResident: !waitingForDisk)
    else { return nil }
    if counting { Self.countCachedRead(bounds.count) }
    return CachedRange(
      objectID: manager.objectID, buffer: buffer, range: bounds, length: length,
      contentType: manifest.contentType, etag: manifest.etag,
      lastModified: manifest.lastModified, storedHeaders: manifest.storedHeaders,
      freshness: freshness?.view(at: now))
  }

  /// Counts a read of `bytes` given wholly from the cache, as `readCachedNow` does (the cache's metrics: a hit
  /// and the bytes served).
  package static func countCachedRead(_ bytes: Int) {
    CacheMetrics.noteRead(fromCache: Int64(bytes), fromOrigin: 0)
    CacheMetrics.noteServed(bytes, fromOrigin: false)
  }

  /// The absolute bytes `readCachedNow` would read now for the same arguments (the same checks, without
  /// reading anything; callable from any thread), or nil: what a caller that bounds its reads needs to know
  /// before it waits for room for them.
  package func cachedBoundsNow(
    _ url: String, objectID: ObjectID? = nil, range: RequestedRange, maxBytes: Int
  ) -> Range<Int64>? {
    guard let session = registry.sessionIfOpen(objectID ?? cache.objectID(for: url)) else { return nil }
    defer { session.endRead() }
    let manifest = session.manager.manifest
    guard session.freshness(of: manifest).map({ $0.isFresh(at: Date()) }) ?? true else { return nil }
    return Self.cachedBounds(of: range, in: manifest, maxBytes: maxBytes)
  }

  /// `range` resolved against the object's length, if that is known, the range is not empty and at most
  /// `maxBytes`, and every byte of it is cached in `manifest` (the view's), in present chunks or in spans of
  /// incomplete ones (a span is read whole and checked against its CRC): a range not cached returns nil here,
  /// without `planVerifiedRead` reading the manifest from disk in case another process committed it.
  private static func cachedBounds(of range: RequestedRange, in manifest: Manifest, maxBytes: Int)
    -> Range<Int64>?
  {
    guard let length = manifest.contentLength, let bounds = range.resolved(length: length), !bounds.isEmpty,
      bounds.count <= maxBytes
    else { return nil }
    var position = bounds.lowerBound
    while position < bounds.upperBound {
      let run = manifest.cachedRun(at: position)  // to the end of the chunk, or of the span, holding it
      guard run > 0 else { return nil }
      position += run
    }
    return bounds
  }

  /// Takes back the buffer of a `CachedRange` once it was handed to the socket's writer, for a later read.
  package func recycle(_ buffer: ByteBuffer) {
    environment.bufferPool.give(buffer)
  }
}
