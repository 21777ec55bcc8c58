/// An optional report field that is written as JSON `null` when absent, so every report has every key
/// (docs/REPORTS.md), and that decodes from a `null` or a missing key alike.
///
/// Synthesized `Codable` leaves out a nil optional (`encodeIfPresent`); this wrapper makes the synthesized
/// conformance write the key, so report types need no hand-written `encode(to:)` to list their keys.
@propertyWrapper
public struct NullWhenAbsent<Value> {
  /// The field's value.
  public var wrappedValue: Value?

  /// A field holding `wrappedValue`.
  public init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }
}

extension NullWhenAbsent: Sendable where Value: Sendable {}
extension NullWhenAbsent: Equatable where Value: Equatable {}
extension NullWhenAbsent: Hashable where Value: Hashable {}

extension NullWhenAbsent: Encodable where Value: Encodable {
  /// The value, or `null`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
  }
}

extension NullWhenAbsent: Decodable where Value: Decodable {
  /// The value, or nil for `null`.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    wrappedValue = container.decodeNil() ? nil : try container.decode(Value.self)
  }
}

extension KeyedDecodingContainer {
  /// A missing key decodes as an absent field (what the synthesized conformance asks of a wrapped optional).
  public func decode<Value: Decodable>(_ type: NullWhenAbsent<Value>.Type, forKey key: Key) throws
    -> NullWhenAbsent<Value>
  {
    try decodeIfPresent(type, forKey: key) ?? NullWhenAbsent(wrappedValue: nil)
  }
}
