import ArgumentParser
import Foundation
import MediaCache

/// A size in bytes: plain bytes (`1073741824`) or a number with a binary unit K, M, G or T (`512K`, `500M`,
/// `1.5G`, `1T`; case-insensitive, with an optional trailing `B` or `iB`).
struct ByteSizeArgument: ExpressibleByArgument, Equatable, CustomStringConvertible {
  /// The size in bytes.
  var bytes: Int64

  /// Why a size argument was refused; the description is shown after ArgumentParser's "invalid value" line.
  struct ParseError: Error, CustomStringConvertible {
    var text: String
    var reason: String
    var description: String {
      "'\(text)' is not a size: \(reason) (use bytes such as 1073741824, or 512K, 500M, 1.5G, 1T)"
    }
  }

  init(bytes: Int64) { self.bytes = bytes }

  init?(argument: String) {
    guard let parsed = try? Self.parse(argument) else { return nil }
    self = parsed
  }

  /// Parses `text`, throwing a `ParseError` that says what is wrong (for `@Option(transform:)`).
  static func parse(_ text: String) throws -> ByteSizeArgument {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    guard !trimmed.isEmpty else { throw ParseError(text: text, reason: "it is empty") }
    if trimmed.hasPrefix("-") { throw ParseError(text: text, reason: "a size cannot be negative") }
    // A decimal number (digits, at most one point) and at most a unit: refuses 1e9, 0x10, inf, nan.
    let number = trimmed.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
    let unit = trimmed.dropFirst(number.count).uppercased()
    guard number.contains(where: \.isNumber), number.filter({ $0 == "." }).count <= 1 else {
      throw ParseError(text: text, reason: "expected a number, then optionally a unit")
    }
    let prefixes = ["K", "M", "G", "T"]
    let units = Set(["", "B"] + prefixes + prefixes.map { $0 + "B" } + prefixes.map { $0 + "IB" })
    guard units.contains(unit) else {
      throw ParseError(text: text, reason: "unknown unit '\(trimmed.dropFirst(number.count))'")
    }
    guard let bytes = HumanUnits.parseSize(trimmed) else {
      throw ParseError(
        text: text,
        reason: unit.isEmpty || unit == "B" ? "plain bytes must be a whole number" : "it is too large")
    }
    return ByteSizeArgument(bytes: bytes)
  }

  var description: String { "\(bytes) bytes" }

  static var defaultCompletionKind: CompletionKind { .default }
}
