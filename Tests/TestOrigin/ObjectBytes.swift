// Deterministic object contents, validators and the gzip framing used by `TestOrigin`.
//
// The bytes of an object are a pure function of (name, version, offset): byte `o` is byte `o % 8`
// (little-endian) of the 64-bit word `mix(seed(name, version) &+ (o / 8) &* golden)`. Any slice can be
// computed on its own, so the origin streams objects of several GiB piece by piece and a test computes
// the bytes it expects without storing the object.

extension TestOrigin {
  /// The first `size` bytes of object `name` at `version`.
  public static func bytes(name: String, size: Int, version: Int = 0) -> [UInt8] {
    bytes(name: name, size: size, version: version, range: 0..<max(0, size))
  }

  /// Bytes `range` of object `name` at `version` (`range` is clamped to `0..<size`).
  public static func bytes(name: String, size: Int, version: Int = 0, range: Range<Int>) -> [UInt8] {
    let lower = min(max(0, range.lowerBound), max(0, size))
    let upper = min(max(lower, range.upperBound), max(0, size))
    let seed = ObjectBytes.seed(name: name, version: version)
    return [UInt8](unsafeUninitializedCapacity: upper - lower) { buffer, initialized in
      ObjectBytes.fill(UnsafeMutableRawBufferPointer(buffer), seed: seed, offset: lower)
      initialized = upper - lower
    }
  }

  /// Fills `buffer` with the bytes of object `name` at `version` starting at object offset `offset`.
  public static func fill(
    _ buffer: UnsafeMutableRawBufferPointer, name: String, version: Int = 0, offset: Int
  ) {
    ObjectBytes.fill(buffer, seed: ObjectBytes.seed(name: name, version: version), offset: offset)
  }

  /// The strong ETag the origin sends for `name` at `version` (quotes included): `"<name>-v<version>"`.
  public static func etag(name: String, version: Int = 0) -> String { "\"\(name)-v\(version)\"" }

  /// The Last-Modified value (RFC 1123) the origin sends for any object at `version`:
  /// 2024-01-01 00:00:00 GMT plus `version` days (version 0 is `Mon, 01 Jan 2024 00:00:00 GMT`).
  public static func lastModified(version: Int = 0) -> String {
    HTTPDate.rfc1123(daysSinceEpoch: 19_723 + version)
  }

  /// The exact body the `gzip` mode sends for an object: a real gzip stream (deflate "stored" blocks, so
  /// nothing is compressed) that any gzip decoder turns back into `bytes(name:size:version:)`.
  public static func gzipBody(name: String, size: Int, version: Int = 0) -> [UInt8] {
    var producer = GzipProducer(seed: ObjectBytes.seed(name: name, version: version), size: size)
    var result: [UInt8] = []
    result.reserveCapacity(GzipProducer.encodedSize(of: size))
    while let piece = producer.nextPiece() { result += piece }
    return result
  }
}

enum ObjectBytes {
  private static let golden: UInt64 = 0x9E37_79B9_7F4A_7C15

  @inline(__always)
  static func mix(_ value: UInt64) -> UInt64 {
    var z = value
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  static func seed(name: String, version: Int) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in name.utf8 {
      hash ^= UInt64(byte)
      hash &*= 0x0000_0100_0000_01B3
    }
    return mix(hash ^ mix(UInt64(bitPattern: Int64(version)) &+ golden))
  }

  @inline(__always)
  static func word(seed: UInt64, index: Int) -> UInt64 {
    mix(seed &+ UInt64(truncatingIfNeeded: index) &* golden)
  }

  /// Writes the object bytes for offsets `offset..<offset + buffer.count` into `buffer`.
  static func fill(_ buffer: UnsafeMutableRawBufferPointer, seed: UInt64, offset: Int) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    let count = buffer.count
    var position = 0
    // Leading bytes up to the next word boundary of the object.
    let misalignment = offset & 7
    if misalignment != 0 {
      let value = word(seed: seed, index: offset >> 3)
      while position < count && (offset + position) & 7 != 0 {
        base.storeBytes(
          of: UInt8(truncatingIfNeeded: value >> (UInt64((offset + position) & 7) * 8)),
          toByteOffset: position, as: UInt8.self)
        position += 1
      }
    }
    // Whole words.
    var index = (offset + position) >> 3
    while count - position >= 8 {
      base.storeBytes(
        of: word(seed: seed, index: index).littleEndian, toByteOffset: position, as: UInt64.self)
      position += 8
      index += 1
    }
    // Trailing bytes.
    if position < count {
      let value = word(seed: seed, index: index)
      var shift: UInt64 = 0
      while position < count {
        base.storeBytes(of: UInt8(truncatingIfNeeded: value >> shift), toByteOffset: position, as: UInt8.self)
        position += 1
        shift += 8
      }
    }
  }
}

/// A gzip stream made of deflate stored blocks, produced piece by piece (one block per piece).
struct GzipProducer {
  static let blockSize = 65_535
  private static let header: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xFF]

  let seed: UInt64
  let size: Int
  private var offset = 0
  private var started = false
  private var done = false
  private var crc = CRC32()

  init(seed: UInt64, size: Int) {
    self.seed = seed
    self.size = max(0, size)
  }

  static func encodedSize(of size: Int) -> Int {
    let blocks = size == 0 ? 1 : (size + blockSize - 1) / blockSize
    return header.count + 5 * blocks + size + 8
  }

  /// The next piece of the stream (the gzip header with the first block, one stored block of up to
  /// `blockSize` object bytes, the trailer with the last block), or nil at the end.
  mutating func nextPiece() -> [UInt8]? {
    guard !done else { return nil }
    var piece: [UInt8] = []
    if !started {
      piece += Self.header
      started = true
    }
    let length = min(Self.blockSize, size - offset)
    let isFinal = offset + length == size
    piece.append(isFinal ? 0x01 : 0x00)
    let len = UInt16(length)
    piece += [UInt8(len & 0xFF), UInt8(len >> 8), UInt8(~len & 0xFF), UInt8(~len >> 8)]
    let start = piece.count
    piece += [UInt8](repeating: 0, count: length)
    piece.withUnsafeMutableBytes { raw in
      let data = UnsafeMutableRawBufferPointer(rebasing: raw[start...])
      ObjectBytes.fill(data, seed: seed, offset: offset)
      crc.update(UnsafeRawBufferPointer(data))
    }
    offset += length
    if isFinal {
      let value = crc.value
      let total = UInt32(truncatingIfNeeded: size)
      for shift in stride(from: 0, to: 32, by: 8) { piece.append(UInt8(truncatingIfNeeded: value >> shift)) }
      for shift in stride(from: 0, to: 32, by: 8) { piece.append(UInt8(truncatingIfNeeded: total >> shift)) }
      done = true
    }
    return piece
  }
}

/// CRC-32 (IEEE, reflected), as used by gzip.
struct CRC32 {
  private static let table: [UInt32] = (0..<256).map { index in
    var value = UInt32(index)
    for _ in 0..<8 { value = value & 1 != 0 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
    return value
  }

  private var state: UInt32 = 0xFFFF_FFFF

  mutating func update(_ bytes: UnsafeRawBufferPointer) {
    var crc = state
    Self.table.withUnsafeBufferPointer { table in
      for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
    }
    state = crc
  }

  var value: UInt32 { state ^ 0xFFFF_FFFF }
}

enum HTTPDate {
  private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
  private static let months = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
  ]

  /// `Www, DD Mmm YYYY 00:00:00 GMT` for midnight of the given day (days since 1970-01-01).
  static func rfc1123(daysSinceEpoch days: Int) -> String {
    rfc1123(secondsSinceEpoch: days * 86_400)
  }

  /// `Www, DD Mmm YYYY HH:MM:SS GMT` for the given second (seconds since 1970-01-01 00:00:00 UTC).
  static func rfc1123(secondsSinceEpoch seconds: Int) -> String {
    let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
    let secondOfDay = seconds - days * 86_400
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthPrime = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
    let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    let weekday = weekdays[((days % 7) + 7) % 7]
    func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let time =
      "\(twoDigits(secondOfDay / 3600)):\(twoDigits(secondOfDay / 60 % 60)):\(twoDigits(secondOfDay % 60))"
    return "\(weekday), \(twoDigits(day)) \(months[month - 1]) \(year) \(time) GMT"
  }
}
