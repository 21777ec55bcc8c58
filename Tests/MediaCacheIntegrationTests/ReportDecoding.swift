import Foundation
import MediaCache

/// A tool's `--json` output that does not decode into the type the tool encodes it from.
struct UndecodableOutput: Error, CustomStringConvertible {
  var type: String
  var error: any Error
  var output: String
  var description: String { "cannot decode \(type) (\(error)) from: \(output)" }
}

/// Decodes what a tool printed with `--json` into `type`, with the reports' decoder (`ReportJSON`).
func decodeReport<Report: Decodable>(_ type: Report.Type, _ result: CommandResult) throws -> Report {
  try decodeReport(type, result.stdout)
}

func decodeReport<Report: Decodable>(_ type: Report.Type, _ data: Data) throws -> Report {
  do {
    return try ReportJSON.decode(type, from: data)
  } catch {
    throw UndecodableOutput(
      type: String(describing: type), error: error, output: String(decoding: data, as: UTF8.self))
  }
}

/// The keys of a JSON object, read without assuming a schema: to compare what two tools print.
struct JSONKeys: Decodable, Equatable {
  var keys: Set<String>

  private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  init(from decoder: any Decoder) throws {
    keys = Set(try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue))
  }
}
