import MediaCache

/// What a read found at hand when it opened: the bytes that count as from the cache for it, not as fetched from
/// the origin for it, whoever's flight later brings or writes the rest (`CachedBytes.cachedBytesAtOpen`, and
/// each piece delivered: `CachedBytes.noteDelivered(_:at:)`).
struct BytesAtHand: Sendable {
  /// A response's first bytes a flight of this process handed over while writing them
  /// (`FlightState.bytesBeingWritten`), and the object version they are written under (nil: not told).
  typealias InFlight = (range: Range<Int64>, version: UInt32?)

  /// The manifest the read went by. Its version is the one a later read of the same request compares with.
  let manifest: Manifest
  /// The manifest's bytes, and those of its version that this process's flights were still writing.
  let ranges: ByteRangeSet

  /// For a read of its own: `manifest`'s bytes and, of `inFlight` (looked at before the manifest: once their
  /// write is over, the manifest lists them), those of the manifest's version. Bytes of another version (a
  /// flight whose object was reset while it wrote them: its write is refused) are not at hand.
  init(manifest: Manifest, inFlight: [InFlight]) {
    var ranges = manifest.presentByteRanges
    for bytes in inFlight where bytes.version == manifest.versionTag { ranges.insert(bytes.range) }
    self.init(manifest: manifest, ranges: ranges)
  }

  /// For a later read of one request (the proxy's whole object after an `If-Range` that does not match or an
  /// open range of unknown length, and a playlist read whole), which goes by what was at hand when the request
  /// began, so that the bytes its first read brought, written or still being written, count as fetched:
  /// - the object still at the version the first read opened at: what the first read found (`first`);
  /// - reset while the first read opened, before it reported a version (`firstShown`, the version whose metadata
  ///   it reported, is not the one it opened at, or it reported none): nothing. The new version's bytes came
  ///   after the request began, most likely by its own first read's flight (whose response had other
  ///   validators);
  /// - reset after the first read reported the version it opened at (by another read): what is at hand now, as
  ///   for a read of its own.
  init(manifest: Manifest, inFlight: [InFlight], after first: BytesAtHand, firstShown: UInt32?) {
    if manifest.versionTag == first.manifest.versionTag {
      self = first
    } else if firstShown == first.manifest.versionTag {
      self.init(manifest: manifest, inFlight: inFlight)
    } else {
      self.init(manifest: manifest, ranges: ByteRangeSet())
    }
  }

  private init(manifest: Manifest, ranges: ByteRangeSet) {
    self.manifest = manifest
    self.ranges = ranges
  }
}
