import MediaCache
import Testing

@testable import MediaCacheHTTP

/// `BytesAtHand`, what a read counts as at hand when it opens, for a read of its own and for a later read of one
/// request, by the object's version: values only, no cache.
@Suite struct BytesAtHandTests {
  static let chunk = 1000

  /// A 10-chunk object's manifest at `version`, listing `chunks`.
  func manifest(version: UInt32, chunks: [Int] = []) -> Manifest {
    var manifest = Manifest(
      objectID: ObjectID(CacheKey("https://example.com/at-hand.mp4")), chunkSize: Self.chunk,
      contentLength: 10 * Int64(Self.chunk))
    manifest.versionTag = version
    for chunk in chunks { manifest.setChunk(chunk, crc: 0) }
    return manifest
  }

  /// The manifest's chunks and the bytes being written under its version; not those of another version (a
  /// flight's write that the reset will refuse).
  @Test func aReadOfItsOwnTakesTheManifestAndItsVersionsBytesBeingWritten() {
    let atHand = BytesAtHand(
      manifest: manifest(version: 7, chunks: [0, 1]),
      inFlight: [(2000..<2500, 7), (3000..<3100, 8), (5000..<5016, 7)])
    #expect(atHand.ranges == ByteRangeSet([0..<2500, 5000..<5016]))
    #expect(atHand.version == 7)
    #expect(BytesAtHand(manifest: manifest(version: 7), inFlight: []).ranges.isEmpty)
  }

  /// At the version the request's first read opened at, a later read goes by what that read found and is still
  /// at hand (cached, or being written), whatever else is cached or being written now (the request's own bytes,
  /// most likely).
  @Test func aLaterReadAtTheFirstReadsVersionGoesByWhatItFoundAndIsStillAtHand() {
    let first = BytesAtHand(manifest: manifest(version: 7, chunks: [0, 2]), inFlight: [(1000..<1016, 7)])
    let later = BytesAtHand(
      manifest: manifest(version: 7, chunks: [0, 1, 2, 3]), inFlight: [(4000..<4500, 7)], after: first)
    #expect(later.ranges == ByteRangeSet([0..<1016, 2000..<3000]))
    #expect(later.version == 7)
    // Chunk 2 dropped since (a failed check, or the object removed and fetched again: a new object's version
    // is 0 again), and the bytes that were being written now written: what is gone is not at hand.
    let dropped = BytesAtHand(manifest: manifest(version: 7, chunks: [0, 1]), inFlight: [], after: first)
    #expect(dropped.ranges == ByteRangeSet([0..<1016]))
  }

  /// Reset since the request's first read opened (by its own flight or another's): nothing of the new version
  /// was at hand when the request began; its bytes, cached or being written, count as fetched.
  @Test func aLaterReadAfterAResetFindsNothing() {
    let first = BytesAtHand(manifest: manifest(version: 7, chunks: [0, 1]), inFlight: [])
    let later = BytesAtHand(
      manifest: manifest(version: 9, chunks: [0]), inFlight: [(1000..<1016, 9)], after: first)
    #expect(later.ranges.isEmpty)
    #expect(later.version == 9, "the version a read after this one compares with")
  }

  /// A read whose object was reset while it opened (the flight that learned its length found another version)
  /// has nothing at hand; one whose object kept its version keeps what it found.
  @Test func aResetWhileTheReadOpenedLeavesNothingAtHand() {
    let opened = BytesAtHand(manifest: manifest(version: 7, chunks: [0]), inFlight: [(1000..<1016, 7)])
    let kept = opened.reset(to: manifest(version: 7, chunks: [0, 1]))
    #expect(kept.ranges == opened.ranges && kept.version == 7)
    let reset = opened.reset(to: manifest(version: 9))
    #expect(reset.ranges.isEmpty && reset.version == 9)
  }
}
