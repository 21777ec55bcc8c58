import Foundation

/// What the cache knows about one object: its length, which chunks are present with the CRC-32 of each, the
/// origin's validators, and the app's own small metadata.
///
/// Stored beside the data file as a binary, self-checksummed sidecar (`docs/FORMAT.md`). A manifest never lists
/// a chunk whose bytes were not written first.
public struct Manifest: Sendable, Equatable {
  /// Smallest chunk size a cache accepts.
  public static let minChunkSize = 4096
  /// Largest chunk size a cache accepts.
  public static let maxChunkSize = 64 << 20
  /// Largest content length the format stores (2^53, so lengths survive a trip through JSON).
  public static let maxContentLength: Int64 = 1 << 53

  /// Largest length an object of `chunkSize` may have: `maxContentLength`, and no chunk index past 2^32 - 1.
  public static func maxLength(chunkSize: Int) -> Int64 {
    min(maxContentLength, Int64(chunkSize) * Int64(UInt32.max))
  }
  /// Longest `contentType` the manifest stores, in UTF-8 bytes.
  public static let maxContentTypeBytes = 255
  /// Longest `etag` the manifest stores, in UTF-8 bytes.
  public static let maxETagBytes = 1024
  /// Longest `lastModified` the manifest stores, in UTF-8 bytes.
  public static let maxLastModifiedBytes = 255
  /// Largest `userMetadata` the manifest stores, in bytes (64 KiB).
  public static let maxUserMetadataBytes = 64 * 1024
  /// Longest `group` the manifest stores, in UTF-8 bytes.
  public static let maxGroupBytes = 255

  /// The object this manifest describes.
  public var objectID: ObjectID
  /// Total length in bytes, once known.
  public var contentLength: Int64?
  /// Bytes per chunk; the last chunk may be shorter.
  public let chunkSize: Int
  /// CRC-32 of every present chunk, by chunk index.
  public private(set) var chunkCRCs: [Int: UInt32]
  /// Runs of bytes of chunks that are not present, each with its CRC-32, by chunk index (ascending, disjoint
  /// and not touching within a chunk; see `Manifest+Spans.swift`).
  public internal(set) var spans: [Int: [Span]] = [:]
  /// MIME type reported by the origin or given on import.
  public var contentType: String?
  /// The origin's entity tag, verbatim (with quotes and any `W/`).
  public var etag: String?
  /// The origin's `Last-Modified` header, verbatim.
  public var lastModified: String?
  /// When the object was first stored, in whole milliseconds.
  public var createdAt: Date
  /// A pinned object is never evicted.
  public var isPinned: Bool
  /// The app's own bytes for this object (at most `maxUserMetadataBytes`).
  public var userMetadata: Data
  /// The group the object belongs to (a file id, an account), removed together by `MediaCache.remove(group:)`;
  /// nil for none. At most `maxGroupBytes` of UTF-8, without control characters (`GroupName`).
  public var group: String?
  /// Names one version of the object's bytes: 0 for an object filled by plain writes, a random non-zero value
  /// from each `reset` (a replaced object or a changed origin). Writers of different tags are never merged,
  /// even when the origin gave no validators.
  public var versionTag: UInt32 = 0
  /// The end-to-end header fields of the origin response the object was stored or last revalidated from, and
  /// when it arrived (nil: none recorded, as for objects written by plain writes or by builds before manifest
  /// 1.3).
  public var storedHeaders: StoredHeaders?

  /// An empty manifest for a new object.
  public init(
    objectID: ObjectID, chunkSize: Int, contentLength: Int64? = nil, createdAt: Date = Date(),
    contentType: String? = nil, etag: String? = nil, lastModified: String? = nil, isPinned: Bool = false,
    userMetadata: Data = Data()
  ) {
    self.objectID = objectID
    self.chunkSize = chunkSize
    self.contentLength = contentLength
    self.chunkCRCs = [:]
    self.createdAt = Date(
      timeIntervalSince1970: (createdAt.timeIntervalSince1970 * 1000).rounded() / 1000)
    self.contentType = contentType
    self.etag = etag
    self.lastModified = lastModified
    self.isPinned = isPinned
    self.userMetadata = userMetadata
  }

  // MARK: Chunks

  /// The number of chunks, once the length is known.
  public var chunkCount: Int? {
    contentLength.map { Int(($0 + Int64(chunkSize) - 1) / Int64(chunkSize)) }
  }

  /// The present chunks.
  public var presentChunks: ChunkSet {
    var runs: [Range<Int>] = []
    for index in chunkCRCs.keys.sorted() {
      if let last = runs.last, last.upperBound == index {
        runs[runs.count - 1] = last.lowerBound..<(index + 1)
      } else {
        runs.append(index..<(index + 1))
      }
    }
    return ChunkSet(canonical: runs)!
  }

  /// Whether chunk `index` is present.
  public func isPresent(_ index: Int) -> Bool { chunkCRCs[index] != nil }

  /// The CRC-32 recorded for chunk `index`, if present.
  public func crc(ofChunk index: Int) -> UInt32? { chunkCRCs[index] }

  /// Records chunk `index` as present with checksum `crc`.
  package mutating func setChunk(_ index: Int, crc: UInt32) {
    chunkCRCs[index] = crc
    spans[index] = nil
  }

  /// Forgets chunk `index` (and any span of it); its bytes will be fetched or written again.
  package mutating func removeChunk(_ index: Int) {
    chunkCRCs[index] = nil
    spans[index] = nil
  }

  /// Forgets every chunk and span (an origin change or a reset).
  package mutating func removeAllChunks() {
    chunkCRCs = [:]
    spans = [:]
  }

  /// The byte range chunk `index` covers, clipped to the length when known.
  public func byteRange(ofChunk index: Int) -> Range<Int64> {
    let start = Int64(index) * Int64(chunkSize)
    var end = start + Int64(chunkSize)
    if let length = contentLength { end = min(end, length) }
    return start..<end
  }

  /// The chunks that hold any byte of `range`.
  public func chunks(covering range: Range<Int64>) -> Range<Int> {
    guard !range.isEmpty else { return 0..<0 }
    let first = Int(range.lowerBound / Int64(chunkSize))
    let last = Int((range.upperBound - 1) / Int64(chunkSize))
    return first..<(last + 1)
  }

  /// The cached bytes, as ranges: present chunks and spans.
  public var presentByteRanges: ByteRangeSet {
    var set = ByteRangeSet()
    for run in presentChunks.ranges {
      let start = Int64(run.lowerBound) * Int64(chunkSize)
      var end = Int64(run.upperBound) * Int64(chunkSize)
      if let length = contentLength { end = min(end, length) }
      set.insert(start..<end)
    }
    for chunkSpans in spans.values {
      for span in chunkSpans { set.insert(span.range) }
    }
    return set
  }

  /// How many bytes are cached.
  public var cachedBytes: Int64 { presentByteRanges.count }

  /// Whether every byte of a known length is cached (an empty object is complete once its length is known).
  public var isComplete: Bool {
    guard let count = chunkCount else { return false }
    return chunkCRCs.count == count
  }

  /// The parts of `range` that are not cached.
  public func missingByteRanges(in range: Range<Int64>) -> [Range<Int64>] {
    presentByteRanges.gaps(in: range)
  }

  /// The fields that identify one version of the origin's object. Two manifests whose identities differ
  /// describe different bytes and must never be merged.
  public var versionIdentity: VersionIdentity {
    VersionIdentity(
      contentLength: contentLength, etag: etag, lastModified: lastModified, chunkSize: chunkSize,
      versionTag: versionTag)
  }

  /// See `versionIdentity`.
  public struct VersionIdentity: Sendable, Equatable {
    /// The object's length in bytes, if known.
    public var contentLength: Int64?
    /// The origin's entity tag, verbatim, if it sent one.
    public var etag: String?
    /// The origin's `Last-Modified` header, verbatim, if it sent one.
    public var lastModified: String?
    /// Bytes per chunk.
    public var chunkSize: Int
    /// The manifest's `versionTag`: 0 for plain writes, random and non-zero after each `reset`.
    public var versionTag: UInt32

    /// Whether two versions can be the same bytes: equal chunk size and version tag, and no known field that
    /// differs.
    /// (A length learned later, or a validator first seen later, does not make them differ.)
    public func isCompatible(with other: VersionIdentity) -> Bool {
      func agree<T: Equatable>(_ a: T?, _ b: T?) -> Bool { a == nil || b == nil || a == b }
      return chunkSize == other.chunkSize && versionTag == other.versionTag
        && agree(contentLength, other.contentLength)
        && agree(etag, other.etag) && agree(lastModified, other.lastModified)
    }
  }
}
