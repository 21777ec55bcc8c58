import MediaCache
import NIOCore

extension BodyWriter {
  /// Bytes freed at least when a write finds the disk full (so a stream does not run a pass per chunk).
  static let roomAfterNoSpace: Int64 = 64 << 20

  /// Writes a batch of body parts, the first at `at`, to the cache (on the I/O executor).
  static func write(
    _ batch: [ByteBuffer], at: Int64, ifVersion tag: UInt32, flight: Flight, session: ObjectSession,
    url: String
  ) throws {
    var position = at
    for part in batch {
      // Said before the write: the part's chunk may show as present in the manifest as soon as it is
      // written, and a reader that reads it from there must find the flight that far along (else it
      // would start a request for what follows, which this flight is about to bring).
      flight.writtenHint.store(position + Int64(part.readableBytes), ordering: .relaxed)
      try Self.write(part, at: position, ifVersion: tag, session: session, url: url)
      position += Int64(part.readableBytes)
    }
  }

  /// Writes one body part to the cache (on the I/O executor).
  static func write(
    _ buffer: ByteBuffer, at offset: Int64, ifVersion tag: UInt32, session: ObjectSession, url: String
  ) throws {
    try buffer.withUnsafeReadableBytes { raw in
      do {
        do {
          try session.manager.write(raw, at: offset, ifVersion: tag)
        } catch let error as StoreError {
          // A full disk, and the app set limits: evict as the limits would (least recently used, never an
          // object in use), then try once more; without limits, or if nothing could go, ENOSPC stands.
          guard error.code == .io, error.errno == .noSpace else { throw error }
          let room = max(Self.roomAfterNoSpace, 16 * Int64(session.manager.manifest.chunkSize))
          guard ((try? session.environment.cache.makeRoom(for: room)) ?? 0) > 0 else { throw error }
          try session.manager.write(raw, at: offset, ifVersion: tag)
        }
      } catch let error as StoreError where error.code == .outOfBounds {
        throw OriginError.inconsistentResponse(
          url: url, reason: "body runs past the length the origin declared")
      }
    }
  }

  /// The chunk after the one holding `end` (where the batch being submitted ends), if `head`'s response goes
  /// on into it and no job readied it yet: the job that writes up to `end` readies it after handing its bytes
  /// over (`FileHandleAssetDataManager.prepareForWriting`), so the writes that reach it later land in large
  /// page-cache folios. On the event loop.
  func chunkToPrepare(after end: Int64, in head: ResponseHead) -> Int? {
    let chunkSize = Int64(stored.chunkSize)
    guard chunkSize > 0 else { return nil }
    let next = Int(end / chunkSize) + 1
    let responseEnd = head.expectedBodyLength.map { head.start + $0 } ?? .max
    guard next > preparedChunk, Int64(next) * chunkSize < responseEnd else { return nil }
    preparedChunk = next
    return next
  }
}
