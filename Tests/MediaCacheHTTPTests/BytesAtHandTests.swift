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
  /// flight's write that the reset will refuse), nor those of no version told.
  @Test func aReadOfItsOwnTakesTheManifestAndItsVersionsBytesBeingWritten() {
    let atHand = BytesAtHand(
      manifest: manifest(version: 7, chunks: [0, 1]),
      inFlight: [(2000..<2500, 7), (3000..<3100, 8), (4000..<4100, nil), (5000..<5016, 7)])
    #expect(atHand.ranges == ByteRangeSet([0..<2500, 5000..<5016]))
    #expect(atHand.manifest.versionTag == 7)
    #expect(BytesAtHand(manifest: manifest(version: 7), inFlight: []).ranges.isEmpty)
  }

  /// At the version the request's first read opened at, a later read goes by what that read found, whatever
  /// is cached or being written now (the request's own bytes, most likely).
  @Test func aLaterReadAtTheFirstReadsVersionGoesByWhatItFound() {
    let first = BytesAtHand(manifest: manifest(version: 7, chunks: [0]), inFlight: [(1000..<1016, 7)])
    for shown in [nil, 7, 9] as [UInt32?] {
      let later = BytesAtHand(
        manifest: manifest(version: 7, chunks: [0, 1, 2]), inFlight: [(3000..<3500, 7)], after: first,
        firstShown: shown)
      #expect(later.ranges == ByteRangeSet([0..<1016]), "first read reported \(String(describing: shown))")
      #expect(later.manifest.versionTag == 7)
    }
  }

  /// Reset while the request's first read opened (it reported the new version, or none): nothing of the new
  /// version was at hand when the request began; its bytes, cached or being written, count as fetched.
  @Test func aLaterReadAfterAResetDuringTheFirstReadFindsNothing() {
    let first = BytesAtHand(manifest: manifest(version: 7, chunks: [0, 1]), inFlight: [])
    for shown in [nil, 9] as [UInt32?] {
      let later = BytesAtHand(
        manifest: manifest(version: 9, chunks: [0]), inFlight: [(1000..<1016, 9)], after: first,
        firstShown: shown)
      #expect(later.ranges.isEmpty, "first read reported \(String(describing: shown))")
      #expect(later.manifest.versionTag == 9, "the version a read after this one compares with")
    }
  }

  /// Reset after the request's first read reported the version it opened at (by another read): what is at hand
  /// now, as for a read of its own, bytes of the current version being written included.
  @Test func aLaterReadAfterAResetByAnotherReadGoesByWhatIsAtHandNow() {
    let first = BytesAtHand(manifest: manifest(version: 7, chunks: [0, 1]), inFlight: [])
    let later = BytesAtHand(
      manifest: manifest(version: 9, chunks: [3]), inFlight: [(0..<16, 9), (1000..<1016, 7)], after: first,
      firstShown: 7)
    #expect(later.ranges == ByteRangeSet([0..<16, 3000..<4000]))
    #expect(later.manifest.versionTag == 9)
  }
}
