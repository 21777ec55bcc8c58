import Foundation

/// The one JSON encoding of every report the tools print (`mediacache … --json`, `cache-fsck --json`,
/// `cache-compactor --json`) and of the fixtures' expectations: the report types are `Codable`, and this is
/// where their JSON is configured, once. The schemas are documented in `docs/REPORTS.md`.
///
/// The output is one line (no pretty printing unless asked), keys sorted, `/` not escaped, dates as ISO 8601
/// strings in UTC (`2023-11-14T22:13:20Z`, whole seconds). Reports never hold a non-finite number, so encoding
/// one throws rather than writing something that is not JSON.
public enum ReportJSON {
  /// A new encoder with the reports' settings; `pretty` adds line breaks and indentation (for files people
  /// read, such as the fixtures' `expected.json`).
  public static func encoder(pretty: Bool = false) -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting =
      pretty
      ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    return encoder
  }

  /// A new decoder that reads what `encoder()` writes.
  public static func decoder() -> JSONDecoder {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return decoder
  }

  /// The JSON of `value` on one line, without a trailing newline.
  public static func encode(_ value: some Encodable) throws -> String {
    String(decoding: try encoder().encode(value), as: UTF8.self)
  }

  /// `value` decoded from JSON written by `encode(_:)`.
  public static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
    try decoder().decode(type, from: data)
  }
}
