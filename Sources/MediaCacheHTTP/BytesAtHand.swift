import MediaCache

/// What a read found at hand when it opened: the bytes that count as from the cache for it, not as fetched from
/// the origin for it, whoever's flight later brings or writes the rest (`CachedBytes.cachedBytesAtOpen`, and
/// each piece delivered: `CachedBytes.noteDelivered(_:at:)`). Only bytes of the version the read delivers count:
/// where the object was reset while the read opened, nothing of the new version was at hand.
struct BytesAtHand: Sendable {
  /// A response's first bytes a flight of this process handed over while writing them
  /// (`FlightState.bytesBeingWritten`), and the object version they are written under.
  typealias InFlight = (range: Range<Int64>, version: UInt32)

  /// The object version the read went by: the one a later read of the same request compares with.
  let version: UInt32
  /// For a read of its own, the manifest's bytes and those of its version that this process's flights were
  /// still writing; for a later read of one request, those of the first read's still at hand; empty where the
  /// object's version changed since the read (or the request) began.
  let ranges: ByteRangeSet

  /// For a read of its own: `manifest`'s bytes and, of `inFlight` (looked at before the manifest: once their
  /// write is over, the manifest lists them), those of the manifest's version. Bytes of another version (a
  /// flight whose object was reset while it wrote them: its write is refused) are not at hand.
  init(manifest: Manifest, inFlight: [InFlight]) {
    var ranges = manifest.presentByteRanges
    for bytes in inFlight where bytes.version == manifest.versionTag { ranges.insert(bytes.range) }
    self.init(version: manifest.versionTag, ranges: ranges)
  }

  /// For a later read of one request (the proxy's whole object after an `If-Range` that does not match or an
  /// open range of unknown length, a playlist read whole, a response begun again after its object changed),
  /// which goes by what was at hand when the request began, so that the bytes its first read brought, written
  /// or still being written, count as fetched: of what its first read found (`first`), what is still at hand
  /// (cached, or being written) at the version that read opened at; nothing once the object's version changed
  /// since (a reset, most likely by the request's own flight, whose answer had other validators: the new
  /// version's bytes all came after the request began; where another process replaced the object, its bytes
  /// are counted as fetched though they were on disk: the rule errs that way, never towards a false hit).
  init(manifest: Manifest, inFlight: [InFlight], after first: BytesAtHand) {
    guard manifest.versionTag == first.version else {
      self.init(version: manifest.versionTag, ranges: ByteRangeSet())
      return
    }
    // An object removed and fetched again between the reads starts at the same version (0): only what is
    // still at hand of what was counts. (First's ranges less those not at hand now: the intersection.)
    let now = BytesAtHand(manifest: manifest, inFlight: inFlight).ranges
    self.init(version: first.version, ranges: first.ranges.subtracting(first.ranges.subtracting(now)))
  }

  /// What a read that found this at hand goes by when its object was reset, to `manifest`, while it opened
  /// (its length unknown, the flight that learned it got another version): nothing of the new version.
  func reset(to manifest: Manifest) -> BytesAtHand {
    manifest.versionTag == version ? self : BytesAtHand(version: manifest.versionTag, ranges: ByteRangeSet())
  }

  private init(version: UInt32, ranges: ByteRangeSet) {
    self.version = version
    self.ranges = ranges
  }
}
