import Foundation

// What the measurements print: lines for people, and the same figures as one JSON object with --json.

/// A JSON value with object keys kept in insertion order.
indirect enum JSON {
  case number(Double)
  case integer(Int64)
  case string(String)
  case bool(Bool)
  case array([JSON])
  case object([(String, JSON)])
  case null

  var text: String {
    switch self {
    case .number(let value):
      guard value.isFinite else { return "null" }
      return String(format: "%.3f", value)
    case .integer(let value): return String(value)
    case .string(let value): return Self.quote(value)
    case .bool(let value): return value ? "true" : "false"
    case .null: return "null"
    case .array(let values): return "[" + values.map(\.text).joined(separator: ",") + "]"
    case .object(let fields):
      return "{" + fields.map { "\(Self.quote($0.0)):\($0.1.text)" }.joined(separator: ",") + "}"
    }
  }

  static func quote(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\t": out += "\\t"
      case "\r": out += "\\r"
      default:
        if scalar.value < 0x20 {
          out += String(format: "\\u%04x", scalar.value)
        } else {
          out.unicodeScalars.append(scalar)
        }
      }
    }
    return out + "\""
  }
}

/// Human-readable lines and a JSON object built side by side; one of them is printed at the end.
struct Report {
  var lines: [String] = []
  var fields: [(String, JSON)] = []

  mutating func line(_ text: String) { lines.append(text) }
  mutating func set(_ key: String, _ value: JSON) { fields.append((key, value)) }

  func emit(json: Bool) {
    if json {
      print(JSON.object(fields).text)
    } else {
      for line in lines { print(line) }
    }
  }
}

func fixed(_ value: Double, _ decimals: Int = 1) -> String {
  value.isFinite ? String(format: "%.\(decimals)f", value) : "n/a"
}
