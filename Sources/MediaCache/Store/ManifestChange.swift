import Foundation

/// What one writer wants to change in an object's manifest since it last read it. Applied under the commit lock
/// to whatever manifest is on disk then, so concurrent writers' chunks are merged rather than overwritten.
struct ManifestChange: Sendable {
  /// Chunks this writer completed, with the CRC it computed from the bytes it wrote.
  var added: [Int: UInt32] = [:]
  /// Chunks this writer found corrupt, with the CRC that failed: dropped only if the disk still records that
  /// CRC (another writer may have rewritten the chunk since).
  var dropped: [Int: UInt32] = [:]
  /// The spans (bytes of incomplete chunks) this writer has written, by chunk: added to the disk's.
  var spans: [Int: [Manifest.Span]] = [:]
  /// Spans this writer found corrupt: dropped only if the disk records exactly them.
  var droppedSpans: [Manifest.Span] = []
  /// Metadata this writer set.
  var isPinned: Bool?
  var userMetadata: Data?
  /// An empty string clears the content type.
  var contentType: String?
  /// An empty string clears the group.
  var group: String?
  /// A length this writer learned.
  var contentLength: Int64?
  /// Validators this writer learned (the merge takes them from the writer's view where the disk has none).
  var etag: String?
  var lastModified: String?
  /// The origin response's header fields this writer recorded (replacing the disk's).
  var storedHeaders: StoredHeaders?
  /// True when this writer started a new origin version: its identity replaces the disk's and the disk's
  /// chunks are discarded.
  var reset = false

  var isEmpty: Bool {
    added.isEmpty && dropped.isEmpty && spans.isEmpty && droppedSpans.isEmpty && isPinned == nil
      && userMetadata == nil && contentType == nil && group == nil
      && contentLength == nil && etag == nil && lastModified == nil && storedHeaders == nil && !reset
  }

  /// Takes back `earlier`, a change that was handed to a commit that failed, under this later one: what this
  /// change says wins.
  mutating func absorb(earlier: ManifestChange) {
    for (index, crc) in earlier.added where added[index] == nil && dropped[index] == nil {
      added[index] = crc
    }
    for (index, crc) in earlier.dropped where added[index] == nil && dropped[index] == nil {
      dropped[index] = crc
    }
    for (index, list) in earlier.spans where spans[index] == nil && added[index] == nil {
      spans[index] = list
    }
    droppedSpans += earlier.droppedSpans.filter { !droppedSpans.contains($0) }
    isPinned = isPinned ?? earlier.isPinned
    userMetadata = userMetadata ?? earlier.userMetadata
    contentType = contentType ?? earlier.contentType
    group = group ?? earlier.group
    contentLength = contentLength ?? earlier.contentLength
    etag = etag ?? earlier.etag
    lastModified = lastModified ?? earlier.lastModified
    storedHeaders = storedHeaders ?? earlier.storedHeaders
    reset = reset || earlier.reset
  }

  /// Applies the change to `onDisk` (nil when the object has no readable manifest), using `base` — the writer's
  /// own view — for identity fields.
  func merge(into onDisk: Manifest?, base: Manifest) -> CommitResult {
    var result: Manifest
    var superseded = false
    if let onDisk, !reset {
      result = onDisk
      if onDisk.versionIdentity.isCompatible(with: base.versionIdentity) {
        // Learn what the writer knows and the disk does not yet.
        if result.contentLength == nil, let length = base.contentLength {
          // Chunks committed while the length was unknown are full chunks: any reaching past it cannot be right.
          result.contentLength = length
          for index in result.chunkCRCs.keys where Int64(index + 1) * Int64(result.chunkSize) > length {
            result.removeChunk(index)
          }
          result.fitSpans(toLength: length)
        }
        if result.etag == nil { result.etag = base.etag }
        if result.lastModified == nil { result.lastModified = base.lastModified }
        for (index, crc) in added where result.contentLength.map({ index < chunkCount($0) }) ?? true {
          result.setChunk(index, crc: crc)
        }
        addSpans(to: &result)
      } else {
        // Another writer moved the object to a different origin version: this writer's chunks are of the old
        // one and are discarded.
        superseded = true
      }
      for (index, crc) in dropped where result.crc(ofChunk: index) == crc { result.removeChunk(index) }
      for span in droppedSpans { result.removeSpan(span) }
    } else {
      // No readable manifest, or a new version: the writer's own view (which already holds its added chunks) is
      // the truth.
      result = base
      if let onDisk {
        result.createdAt = onDisk.createdAt
        result.isPinned = onDisk.isPinned
        result.userMetadata = onDisk.userMetadata
        result.group = onDisk.group
      }
      for (index, crc) in added { result.setChunk(index, crc: crc) }
      addSpans(to: &result)
      if let length = result.contentLength { result.fitSpans(toLength: length) }
      for (index, crc) in dropped where result.crc(ofChunk: index) == crc { result.removeChunk(index) }
      for span in droppedSpans { result.removeSpan(span) }
    }
    if let isPinned { result.isPinned = isPinned }
    if let userMetadata { result.userMetadata = userMetadata }
    if let contentType { result.contentType = contentType.isEmpty ? nil : contentType }
    if let group { result.group = group.isEmpty ? nil : group }
    // Headers of another version than the disk's now are not that version's.
    if let storedHeaders, !superseded { result.storedHeaders = storedHeaders }
    return CommitResult(manifest: result, superseded: superseded)

    func addSpans(to result: inout Manifest) {
      for (_, list) in spans.sorted(by: { $0.key < $1.key }) {
        for span in list where result.contentLength.map({ span.range.upperBound <= $0 }) ?? true {
          result.addSpan(span)
        }
      }
    }

    func chunkCount(_ length: Int64) -> Int {
      Int((length + Int64(base.chunkSize) - 1) / Int64(base.chunkSize))
    }
  }
}

/// The manifest a commit wrote, and whether the writer's own chunks were discarded because another writer
/// had moved the object to a different origin version.
struct CommitResult: Sendable {
  var manifest: Manifest
  var superseded: Bool
}
