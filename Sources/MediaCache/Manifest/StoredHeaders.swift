import Foundation

/// The end-to-end header fields of the origin response an object was stored or last revalidated from, and when
/// that response arrived: what an HTTP cache needs to serve the object again (its `Cache-Control`, `Expires`,
/// `Date`, `Age`, `Content-Disposition`, `Vary`, custom fields) and to tell whether it is still fresh
/// (RFC 9111 section 4.2). Stored in the manifest from version 1.3 (`docs/FORMAT.md`, section 3.9).
///
/// The content type, `ETag` and `Last-Modified` have their own manifest fields and are not repeated here. What
/// goes in is the caller's choice (`MediaCacheHTTP` leaves out hop-by-hop and framing fields and `Set-Cookie`);
/// this type only bounds and checks it.
public struct StoredHeaders: Sendable, Equatable {
  /// One header field, as received (the name's case kept).
  public struct Field: Sendable, Equatable {
    /// The field name: an HTTP token of 1 to 255 bytes.
    public var name: String
    /// The field value: at most `StoredHeaders.maxBytes` bytes of UTF-8, no control character but tab.
    public var value: String

    /// A field `name: value` (checked when stored: `StoredHeaders.init(receivedAt:fields:)`).
    public init(name: String, value: String) {
      self.name = name
      self.value = value
    }

    /// Bytes the field takes in the manifest's header block: u8 name length, name, u16 value length, value.
    var encodedSize: Int { 1 + name.utf8.count + 2 + value.utf8.count }
  }

  /// The largest header block stored, in bytes (16 KiB, as the sum of `Field.encodedSize`).
  public static let maxBytes = 16 * 1024

  /// When the response arrived (RFC 9111's `response_time`), in whole milliseconds.
  public private(set) var receivedAt: Date
  /// The fields, in the order received.
  public private(set) var fields: [Field]

  /// The fields of a response that arrived at `receivedAt`. A field that is not valid (a name that is not an
  /// HTTP token, a value with a control character) is left out, and so are fields past `maxBytes` in all:
  /// what is stored is always encodable, and never more than the bound.
  public init(receivedAt: Date, fields: [Field]) {
    // Whole milliseconds within what the manifest stores (0 ... 2^50 ms; NaN counts as 0).
    let millis = (receivedAt.timeIntervalSince1970 * 1000).rounded()
    self.receivedAt = Date(timeIntervalSince1970: (millis > 0 ? min(millis, Double(1 << 50)) : 0) / 1000)
    var kept: [Field] = []
    var size = 0
    for field in fields where Self.isValid(field) && size + field.encodedSize <= Self.maxBytes {
      kept.append(field)
      size += field.encodedSize
    }
    self.fields = kept
  }

  /// The values of the fields named `name` (compared without case), in order.
  public func values(_ name: String) -> [String] {
    fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
  }

  /// The first value of the field named `name`, if any.
  public func first(_ name: String) -> String? {
    fields.first { $0.name.caseInsensitiveEquals(name) }?.value
  }

  /// These fields updated by those of a `304 Not Modified` (RFC 9111 section 4.3.4): each field the 304 has
  /// replaces every stored field of that name; the others stay, but `Age`, which only the 304's own counts.
  /// `receivedAt` becomes the 304's.
  public func updated(by notModified: StoredHeaders) -> StoredHeaders {
    // `Age` described the message it came in: a 304 without one leaves none (else the old age would count
    // against the copy again after each revalidation).
    let replaced = Set(notModified.fields.map { $0.name.lowercased() }).union(["age"])
    let kept = fields.filter { !replaced.contains($0.name.lowercased()) }
    return StoredHeaders(receivedAt: notModified.receivedAt, fields: kept + notModified.fields)
  }

  /// The bytes the header block takes.
  var encodedSize: Int { fields.reduce(0) { $0 + $1.encodedSize } }

  static func isValid(_ field: Field) -> Bool {
    let name = field.name.utf8
    return (1...255).contains(name.count) && name.allSatisfy(isTokenByte)
      && field.value.utf8.count <= UInt16.max && isValidValue(field.value.utf8)
  }

  /// No control character but tab (so a stored value can never split a header when it is sent again).
  package static func isValidValue(_ bytes: some Sequence<UInt8>) -> Bool {
    bytes.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
  }

  /// tchar of RFC 9110 section 5.6.2.
  package static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"):
      true
    default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
  }
}

extension String {
  /// ASCII case-insensitive equality (header field names).
  fileprivate func caseInsensitiveEquals(_ other: String) -> Bool {
    utf8.count == other.utf8.count && lowercased() == other.lowercased()
  }
}
