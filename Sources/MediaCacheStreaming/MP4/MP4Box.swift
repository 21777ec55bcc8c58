/// A box (ISO/IEC 14496-12 §4.2) as its header says: its four-character type and where its header, payload
/// and end lie, as absolute file offsets.
struct MP4Box: Sendable, Equatable {
  /// The four-character type (`moov`, `trak`, ...), bytes outside printable ASCII shown as `?`.
  var type: String
  /// Offset of the header's first byte.
  var start: Int64
  /// Offset of the payload's first byte (after the size, type, a 64-bit size and a `uuid` type).
  var payloadStart: Int64
  /// Offset just past the box.
  var end: Int64

  /// The box whose header starts at `offset`, read from `bytes` (which hold the file from `base` on), inside a
  /// container that ends at `containerEnd`. A size of 0 means "to the end of the container".
  ///
  /// - Throws: `MP4Error.invalidBox` for a header cut short by `bytes` or the container, a size smaller than
  ///   the header, or a box reaching past `containerEnd`.
  static func header(
    in bytes: [UInt8], base: Int64, at offset: Int64, containerEnd: Int64, url: String
  ) throws(MP4Error) -> MP4Box {
    func invalid(_ type: String, _ reason: String) -> MP4Error {
      MP4Error(url: url, kind: .invalidBox(type: type, offset: offset, reason: reason))
    }
    let index = Int(offset - base)
    let available = min(Int64(bytes.count - index), containerEnd - offset)
    guard index >= 0, available >= 8 else {
      throw invalid("", "a box header needs 8 bytes, \(available) are left")
    }
    let type = fourCC(bytes, at: index + 4)
    var headerSize: Int64 = 8
    var size = Int64(bigEndian32(bytes, at: index))
    if size == 1 {
      guard available >= 16 else { throw invalid(type, "its 64-bit size is cut short") }
      let large = bigEndian64(bytes, at: index + 8)
      guard large <= UInt64(Int64.max) else {
        throw invalid(type, "its 64-bit size \(large) is out of range")
      }
      size = Int64(large)
      headerSize = 16
    } else if size == 0 {
      size = containerEnd - offset
    }
    if type == "uuid" {
      guard available >= headerSize + 16 else { throw invalid(type, "its extended type is cut short") }
      headerSize += 16
    }
    guard size >= headerSize else { throw invalid(type, "its size \(size) is smaller than its header") }
    guard size <= containerEnd - offset else {
      throw invalid(type, "its size \(size) reaches past its container's end at offset \(containerEnd)")
    }
    return MP4Box(type: type, start: offset, payloadStart: offset + headerSize, end: offset + size)
  }

  /// The boxes that fill `range` (a payload) of `bytes` (which hold the file from `base` on), in order.
  static func children(
    of range: Range<Int64>, in bytes: [UInt8], base: Int64, url: String
  ) throws(MP4Error) -> [MP4Box] {
    var result: [MP4Box] = []
    var offset = range.lowerBound
    // Fewer than 8 bytes at the end are padding some writers leave; they hold no box.
    while range.upperBound - offset >= 8 {
      let box = try header(in: bytes, base: base, at: offset, containerEnd: range.upperBound, url: url)
      result.append(box)
      offset = box.end
    }
    return result
  }

  static func fourCC(_ bytes: [UInt8], at index: Int) -> String {
    String(
      decoding: bytes[index..<index + 4].map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: "?") },
      as: UTF8.self)
  }

  static func bigEndian32(_ bytes: [UInt8], at index: Int) -> UInt32 {
    bytes[index..<index + 4].reduce(0) { $0 << 8 | UInt32($1) }
  }

  static func bigEndian64(_ bytes: [UInt8], at index: Int) -> UInt64 {
    bytes[index..<index + 8].reduce(0) { $0 << 8 | UInt64($1) }
  }
}

/// Big-endian fields read in order from a box's payload, each read checked against the payload's end.
struct MP4FieldReader {
  /// A read past the payload's end.
  struct Short: Error {}

  private let bytes: [UInt8]
  private(set) var index: Int
  private let end: Int

  /// A reader over `box`'s payload in `bytes` (which hold the file from `base` on; the box lies inside them).
  init(_ box: MP4Box, in bytes: [UInt8], base: Int64) {
    self.bytes = bytes
    self.index = Int(box.payloadStart - base)
    self.end = Int(box.end - base)
  }

  /// Bytes left in the payload.
  var remaining: Int { end - index }

  mutating func skip(_ count: Int) throws(Short) {
    guard count <= remaining else { throw Short() }
    index += count
  }

  mutating func u8() throws(Short) -> UInt8 {
    guard remaining >= 1 else { throw Short() }
    defer { index += 1 }
    return bytes[index]
  }

  mutating func u16() throws(Short) -> UInt16 {
    guard remaining >= 2 else { throw Short() }
    defer { index += 2 }
    return UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
  }

  mutating func u32() throws(Short) -> UInt32 {
    guard remaining >= 4 else { throw Short() }
    defer { index += 4 }
    return MP4Box.bigEndian32(bytes, at: index)
  }

  mutating func u64() throws(Short) -> UInt64 {
    guard remaining >= 8 else { throw Short() }
    defer { index += 8 }
    return MP4Box.bigEndian64(bytes, at: index)
  }

  /// The version byte and the 24 bits of flags of a full box (ISO/IEC 14496-12 §4.2).
  mutating func versionAndFlags() throws(Short) -> (version: UInt8, flags: UInt32) {
    let word = try u32()
    return (UInt8(word >> 24), word & 0xFF_FFFF)
  }

  /// An entry count whose entries of `entrySize` bytes each must fit in what is left of the payload.
  mutating func count(ofEntries entrySize: Int) throws(Short) -> Int {
    let count = Int(try u32())
    guard count <= remaining / entrySize else { throw Short() }
    return count
  }
}
