import Foundation

/// The binary manifest format, versions 1.0 to 1.3 (byte by byte in `docs/FORMAT.md`).
///
/// The decoder checks every length and count against the bytes that remain before it allocates, and refuses
/// with a `ManifestError` anything out of bounds; it never traps on input.
public enum ManifestCodec {
  /// `MCMF`.
  public static let magic: [UInt8] = [0x4D, 0x43, 0x4D, 0x46]
  /// The major version written and the only one read.
  public static let majorVersion: UInt8 = 1
  /// The newest minor version written: 1 adds spans (bytes of incomplete chunks), 2 the group, 3 the stored
  /// response headers (`StoredHeaders`). A manifest is
  /// written with the oldest minor version that holds its fields: without spans or group it is 1.0, byte for
  /// byte what earlier builds wrote. A reader accepts any minor version of its major
  /// version and ignores the bytes a newer minor version appends after the last field it knows.
  public static let minorVersion: UInt8 = 3
  /// Bytes of one span entry: chunk index, offset in the chunk, length, CRC-32 (four u32).
  static let spanEntrySize = 16
  /// Size of the fixed header.
  static let headerSize = 72
  /// Smallest possible manifest: header, four empty variable fields, trailing CRC.
  public static let minimumSize = headerSize + 1 + 2 + 1 + 4 + 4

  static let flagPinned: UInt16 = 1 << 0
  static let flagLengthKnown: UInt16 = 1 << 1

  // MARK: Encoding

  /// The bytes of `manifest`. Throws `StoreError.fieldTooLarge` if a field exceeds its limit.
  public static func encode(_ manifest: Manifest) throws -> Data {
    let contentType = Array((manifest.contentType ?? "").utf8)
    let etag = Array((manifest.etag ?? "").utf8)
    let lastModified = Array((manifest.lastModified ?? "").utf8)
    try checkLimit("content type", contentType.count, Manifest.maxContentTypeBytes)
    try checkLimit("ETag", etag.count, Manifest.maxETagBytes)
    try checkLimit("Last-Modified", lastModified.count, Manifest.maxLastModifiedBytes)
    try checkLimit("user metadata", manifest.userMetadata.count, Manifest.maxUserMetadataBytes)
    let group = Array((manifest.group ?? "").utf8)
    try checkLimit("group", group.count, Manifest.maxGroupBytes)
    guard (Manifest.minChunkSize...Manifest.maxChunkSize).contains(manifest.chunkSize) else {
      throw StoreError.invalidConfiguration("chunk size \(manifest.chunkSize) cannot be encoded")
    }
    let lengthLimit = Manifest.maxLength(chunkSize: manifest.chunkSize)
    if let length = manifest.contentLength, length < 0 || length > lengthLimit {
      throw StoreError.outOfBounds(manifest.objectID, range: 0..<max(0, length), length: lengthLimit)
    }
    if let last = manifest.chunkCRCs.keys.max(), last >= Int(UInt32.max) || manifest.chunkCRCs.keys.min()! < 0
    {
      let start = Int64(last) * Int64(manifest.chunkSize)
      throw StoreError.outOfBounds(
        manifest.objectID, range: start..<(start + Int64(manifest.chunkSize)), length: manifest.contentLength)
    }

    let runs = manifest.presentChunks.ranges
    let indices = manifest.chunkCRCs.keys.sorted()
    var out = ByteWriter(capacity: minimumSize + runs.count * 8 + indices.count * 4 + etag.count)
    let spans = manifest.allSpans
    out.append(magic)
    out.append(majorVersion)
    // The oldest minor version that holds what this manifest has: 1.0 bytes for 1.0 content (section 3.5).
    let minor: UInt8 = manifest.storedHeaders != nil ? 3 : !group.isEmpty ? 2 : spans.isEmpty ? 0 : 1
    out.append(minor)
    var flags: UInt16 = 0
    if manifest.isPinned { flags |= flagPinned }
    if manifest.contentLength != nil { flags |= flagLengthKnown }
    out.append(flags)
    out.append(manifest.objectID.bytes)
    out.append(UInt64(manifest.contentLength ?? 0))
    out.append(UInt32(manifest.chunkSize))
    out.append(manifest.versionTag)
    out.append(UInt64(bitPattern: Int64((manifest.createdAt.timeIntervalSince1970 * 1000).rounded())))
    out.append(UInt32(runs.count))
    out.append(UInt32(indices.count))
    for run in runs {
      out.append(UInt32(run.lowerBound))
      out.append(UInt32(run.count))
    }
    for index in indices { out.append(manifest.chunkCRCs[index]!) }
    out.append(UInt8(contentType.count))
    out.append(contentType)
    out.append(UInt16(etag.count))
    out.append(etag)
    out.append(UInt8(lastModified.count))
    out.append(lastModified)
    out.append(UInt32(manifest.userMetadata.count))
    out.append(Array(manifest.userMetadata))
    if minor >= 1 {
      out.append(UInt32(spans.count))
      for span in spans {
        let index = span.range.lowerBound / Int64(manifest.chunkSize)
        out.append(UInt32(index))
        out.append(UInt32(span.range.lowerBound - index * Int64(manifest.chunkSize)))
        out.append(UInt32(span.range.count))
        out.append(span.crc)
      }
    }
    if minor >= 2 {
      out.append(UInt8(group.count))
      out.append(group)
    }
    if minor >= 3, let stored = manifest.storedHeaders {
      // `StoredHeaders` keeps only valid fields within the bound, so the block always fits its u16 length.
      out.append(UInt64(bitPattern: Int64((stored.receivedAt.timeIntervalSince1970 * 1000).rounded())))
      out.append(UInt16(stored.encodedSize))
      for field in stored.fields {
        out.append(UInt8(field.name.utf8.count))
        out.append(Array(field.name.utf8))
        out.append(UInt16(field.value.utf8.count))
        out.append(Array(field.value.utf8))
      }
    }
    out.append(CRC32.checksum(out.bytes))
    return Data(out.bytes)
  }

  private static func checkLimit(_ field: String, _ size: Int, _ limit: Int) throws {
    if size > limit { throw StoreError.fieldTooLarge(field: field, size: size, limit: limit) }
  }

  // MARK: Decoding

  /// Parses `bytes`. With `expectedID`, a manifest for another object is refused.
  public static func decode(_ bytes: Data, expectedID: ObjectID? = nil) throws(ManifestError) -> Manifest {
    let result = bytes.withUnsafeBytes { raw in
      Result { () throws(ManifestError) -> Manifest in try decode(raw, expectedID: expectedID) }
    }
    return try result.get()
  }

  /// Parses raw manifest bytes. With `expectedID`, the manifest must name that object.
  ///
  /// Throws `ManifestError` saying what is wrong and where: too few bytes, a bad magic, an unsupported major
  /// version, a CRC mismatch, a field out of range, another object's id, or bytes after the last field.
  public static func decode(
    _ raw: UnsafeRawBufferPointer, expectedID: ObjectID? = nil
  ) throws(ManifestError) -> Manifest {
    guard raw.count >= 4 else {
      throw .truncated(needed: minimumSize, available: raw.count, field: "magic")
    }
    guard raw.prefix(4).elementsEqual(magic) else { throw .badMagic(found: Array(raw.prefix(4))) }
    guard raw.count >= 6 else {
      throw .truncated(needed: minimumSize, available: raw.count, field: "version")
    }
    let major = raw[4]
    let minor = raw[5]
    guard major == majorVersion else { throw .unsupportedVersion(major: major, minor: minor) }
    guard raw.count >= minimumSize else {
      throw .truncated(needed: minimumSize, available: raw.count, field: "header")
    }
    let body = UnsafeRawBufferPointer(rebasing: raw[..<(raw.count - 4)])
    var tail = ByteReader(UnsafeRawBufferPointer(rebasing: raw[(raw.count - 4)...]))
    let stored: UInt32 = try tail.read("manifest CRC")
    let computed = CRC32.checksum(body)
    guard stored == computed else { throw .checksumMismatch(stored: stored, computed: computed) }

    var reader = ByteReader(body)
    try reader.skip(6, "magic and version")
    let flags: UInt16 = try reader.read("flags")
    guard flags & ~(flagPinned | flagLengthKnown) == 0 else {
      throw .invalidField(name: "flags", reason: "unknown bits 0x\(String(flags, radix: 16))")
    }
    let idBytes = try reader.readBytes(32, "object id")
    let objectID = ObjectID(bytes: idBytes)!
    if let expectedID, expectedID != objectID {
      throw .objectIDMismatch(expected: expectedID, found: objectID)
    }
    let rawLength: UInt64 = try reader.read("content length")
    let chunkSize32: UInt32 = try reader.read("chunk size")
    let versionTag: UInt32 = try reader.read("version tag")
    let createdMillis = Int64(bitPattern: try reader.read("created time") as UInt64)
    let runCount: UInt32 = try reader.read("run count")
    let presentCount: UInt32 = try reader.read("present chunk count")

    let chunkSize = Int(chunkSize32)
    guard (Manifest.minChunkSize...Manifest.maxChunkSize).contains(chunkSize) else {
      throw .invalidField(
        name: "chunk size",
        reason: "\(chunkSize) is outside \(Manifest.minChunkSize)...\(Manifest.maxChunkSize)")
    }
    var contentLength: Int64?
    if flags & flagLengthKnown != 0 {
      let limit = Manifest.maxLength(chunkSize: chunkSize)
      guard rawLength <= UInt64(limit) else {
        throw .invalidField(
          name: "content length", reason: "\(rawLength) exceeds \(limit) for chunk size \(chunkSize)")
      }
      contentLength = Int64(rawLength)
    } else if rawLength != 0 {
      throw .invalidField(
        name: "content length", reason: "\(rawLength) given but the length-known flag is clear")
    }
    let chunkLimit: Int64 =
      contentLength.map { ($0 + Int64(chunkSize) - 1) / Int64(chunkSize) } ?? Int64(UInt32.max)
    guard createdMillis >= 0 && createdMillis <= 1 << 50 else {
      throw .invalidField(name: "created time", reason: "\(createdMillis) ms is not a plausible time")
    }

    // Counts are checked against the remaining bytes before anything is allocated from them.
    let runBytes = Int(runCount) * 8
    let crcBytes = Int(presentCount) * 4
    guard runBytes + crcBytes <= reader.remaining else {
      throw .truncated(needed: runBytes + crcBytes, available: reader.remaining, field: "chunk runs and CRCs")
    }
    guard Int64(presentCount) <= chunkLimit else {
      throw .invalidField(name: "present chunk count", reason: "\(presentCount) exceeds \(chunkLimit) chunks")
    }
    var runs: [Range<Int>] = []
    runs.reserveCapacity(Int(runCount))
    var total: Int64 = 0
    var previousEnd: Int64 = -1
    for runIndex in 0..<Int(runCount) {
      let start = Int64(try reader.read("run start") as UInt32)
      let count = Int64(try reader.read("run length") as UInt32)
      guard count > 0 else { throw .invalidField(name: "run \(runIndex)", reason: "empty") }
      guard start > previousEnd else {
        throw .invalidField(
          name: "run \(runIndex)", reason: "starts at \(start), not after previous run end \(previousEnd)")
      }
      guard start + count <= chunkLimit else {
        throw .invalidField(
          name: "run \(runIndex)", reason: "chunks \(start)..<\(start + count) beyond \(chunkLimit) chunks")
      }
      runs.append(Int(start)..<Int(start + count))
      previousEnd = start + count
      total += count
    }
    guard total == Int64(presentCount) else {
      throw .invalidField(name: "present chunk count", reason: "\(presentCount), but runs hold \(total)")
    }
    var manifest = Manifest(objectID: objectID, chunkSize: chunkSize, contentLength: contentLength)
    manifest.createdAt = Date(timeIntervalSince1970: Double(createdMillis) / 1000)
    manifest.isPinned = flags & flagPinned != 0
    manifest.versionTag = versionTag
    for run in runs {
      for index in run { manifest.setChunk(index, crc: try reader.read("chunk CRC")) }
    }
    manifest.contentType = try reader.readString(
      lengthBytes: 1, limit: Manifest.maxContentTypeBytes, "content type")
    manifest.etag = try reader.readString(lengthBytes: 2, limit: Manifest.maxETagBytes, "ETag")
    manifest.lastModified = try reader.readString(
      lengthBytes: 1, limit: Manifest.maxLastModifiedBytes, "Last-Modified")
    let metadataCount = Int(try reader.read("user metadata length") as UInt32)
    guard metadataCount <= Manifest.maxUserMetadataBytes else {
      throw .invalidField(
        name: "user metadata", reason: "\(metadataCount) bytes exceeds \(Manifest.maxUserMetadataBytes)")
    }
    manifest.userMetadata = Data(try reader.readBytes(metadataCount, "user metadata"))
    if minor >= 1 { try decodeSpans(&reader, into: &manifest, chunkLimit: chunkLimit) }
    if minor >= 2 {
      manifest.group = try reader.readString(lengthBytes: 1, limit: Manifest.maxGroupBytes, "group")
    }
    if minor >= 3 {
      // Time 0 and an empty block: none (what a later minor version writes for an object without them).
      let stored = try decodeStoredHeaders(&reader)
      if stored.receivedAt.timeIntervalSince1970 != 0 || !stored.fields.isEmpty {
        manifest.storedHeaders = stored
      }
    }
    if minor <= minorVersion && reader.remaining != 0 { throw .trailingBytes(count: reader.remaining) }
    return manifest
  }

  /// Version 1.3's stored response headers: an i64 time (ms), a u16 block length, then per field a u8 name
  /// length, the name (an HTTP token), a u16 value length and the value (UTF-8 without control characters but
  /// tab). A block that breaks any rule is refused whole: headers half read could misstate the object's
  /// freshness.
  private static func decodeStoredHeaders(_ reader: inout ByteReader) throws(ManifestError) -> StoredHeaders {
    let millis = Int64(bitPattern: try reader.read("stored headers time") as UInt64)
    guard millis >= 0 && millis <= 1 << 50 else {
      throw .invalidField(name: "stored headers time", reason: "\(millis) ms is not a plausible time")
    }
    let size = Int(try reader.read("stored headers length") as UInt16)
    guard size <= StoredHeaders.maxBytes else {
      throw .invalidField(name: "stored headers", reason: "\(size) bytes exceeds \(StoredHeaders.maxBytes)")
    }
    let block = try reader.readBytes(size, "stored headers")
    var fields: [StoredHeaders.Field] = []
    var offset = 0
    func take(_ count: Int) throws(ManifestError) -> ArraySlice<UInt8> {
      guard count <= block.count - offset else {
        throw .invalidField(name: "stored header \(fields.count)", reason: "runs past the block's end")
      }
      defer { offset += count }
      return block[offset..<(offset + count)]
    }
    while offset < block.count {
      let name = try take(Int(try take(1).first!))
      let valueLength = try take(2)
      let value = try take(Int(valueLength.first!) | Int(valueLength.last!) << 8)
      guard !name.isEmpty, name.allSatisfy(StoredHeaders.isTokenByte),
        StoredHeaders.isValidValue(value), let text = String(validating: value, as: UTF8.self)
      else {
        throw .invalidField(name: "stored header \(fields.count)", reason: "not a valid header field")
      }
      fields.append(StoredHeaders.Field(name: String(decoding: name, as: UTF8.self), value: text))
    }
    return StoredHeaders(receivedAt: Date(timeIntervalSince1970: Double(millis) / 1000), fields: fields)
  }

  /// Version 1.1's spans: a u32 count, then per span its chunk index, offset in the chunk, length and CRC
  /// (u32 each), ordered by chunk then offset, disjoint and not touching, each inside a chunk that is not
  /// present and short of the whole chunk.
  private static func decodeSpans(
    _ reader: inout ByteReader, into manifest: inout Manifest, chunkLimit: Int64
  ) throws(ManifestError) {
    let count = Int(try reader.read("span count") as UInt32)
    guard count * spanEntrySize <= reader.remaining else {
      throw .truncated(needed: count * spanEntrySize, available: reader.remaining, field: "spans")
    }
    let chunkSize = Int64(manifest.chunkSize)
    var previousEnd: Int64 = -1
    for number in 0..<count {
      let index = Int64(try reader.read("span chunk") as UInt32)
      let offset = Int64(try reader.read("span offset") as UInt32)
      let length = Int64(try reader.read("span length") as UInt32)
      let crc: UInt32 = try reader.read("span CRC")
      let start = index * chunkSize + offset
      guard index < chunkLimit, length > 0, offset + length <= chunkSize,
        manifest.contentLength.map({ start + length <= $0 }) ?? true
      else {
        throw .invalidField(
          name: "span \(number)", reason: "chunk \(index) bytes \(offset)..<\(offset + length) out of bounds")
      }
      guard start > previousEnd || (start == previousEnd && offset == 0) else {
        throw .invalidField(
          name: "span \(number)",
          reason: "starts at \(start), not after the previous span's end \(previousEnd)")
      }
      let range = start..<(start + length)
      guard !manifest.isPresent(Int(index)), range != manifest.byteRange(ofChunk: Int(index)) else {
        throw .invalidField(name: "span \(number)", reason: "chunk \(index) is present or covered whole")
      }
      manifest.spans[Int(index), default: []].append(Manifest.Span(range: range, crc: crc))
      previousEnd = range.upperBound
    }
  }
}

/// Appends little-endian integers and raw bytes.
struct ByteWriter {
  var bytes: [UInt8]

  init(capacity: Int) {
    bytes = []
    bytes.reserveCapacity(capacity)
  }

  mutating func append(_ value: some FixedWidthInteger) {
    withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
  }

  mutating func append(_ raw: [UInt8]) { bytes.append(contentsOf: raw) }
}

/// Reads little-endian integers and byte strings from a buffer, throwing `ManifestError.truncated` at the end.
struct ByteReader {
  let buffer: UnsafeRawBufferPointer
  var offset = 0

  init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

  var remaining: Int { buffer.count - offset }

  mutating func skip(_ count: Int, _ field: String) throws(ManifestError) {
    guard count <= remaining else { throw .truncated(needed: count, available: remaining, field: field) }
    offset += count
  }

  mutating func read<T: FixedWidthInteger>(_ field: String) throws(ManifestError) -> T {
    let size = MemoryLayout<T>.size
    guard size <= remaining else { throw .truncated(needed: size, available: remaining, field: field) }
    var value: T = 0
    withUnsafeMutableBytes(of: &value) {
      $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + size)]))
    }
    offset += size
    return T(littleEndian: value)
  }

  mutating func readBytes(_ count: Int, _ field: String) throws(ManifestError) -> [UInt8] {
    guard count >= 0 && count <= remaining else {
      throw .truncated(needed: count, available: remaining, field: field)
    }
    defer { offset += count }
    return Array(buffer[offset..<(offset + count)])
  }

  /// A string stored as a little-endian length of `lengthBytes` bytes then UTF-8; empty means absent.
  mutating func readString(lengthBytes: Int, limit: Int, _ field: String) throws(ManifestError) -> String? {
    let count: Int = lengthBytes == 1 ? Int(try read(field) as UInt8) : Int(try read(field) as UInt16)
    guard count <= limit else { throw .invalidField(name: field, reason: "\(count) bytes exceeds \(limit)") }
    let raw = try readBytes(count, field)
    if raw.isEmpty { return nil }
    guard let text = String(validating: raw, as: UTF8.self) else {
      throw .invalidField(name: field, reason: "not valid UTF-8")
    }
    return text
  }
}
