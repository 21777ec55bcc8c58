import Foundation

/// Sizes and durations as people write them on command lines: `500M`, `10G`, `4096`; `90d`, `12h`, `30m`, `45s`.
package enum HumanUnits {
  /// Bytes from a number with an optional binary suffix K, M, G or T (KiB, MiB, … ; case-insensitive, an
  /// optional trailing `B` or `iB`). Nil for anything else, including negative or overflowing values.
  package static func parseSize(_ text: String) -> Int64? {
    var body = Substring(text.trimmingCharacters(in: .whitespaces).uppercased())
    if body.hasSuffix("IB") {
      body = body.dropLast(2)
    } else if body.hasSuffix("B") && body.count > 1 {
      body = body.dropLast()
    }
    let shifts: [Character: Int64] = ["K": 10, "M": 20, "G": 30, "T": 40]
    var shift: Int64 = 0
    if let last = body.last, let value = shifts[last] {
      shift = value
      body = body.dropLast()
    }
    guard !body.isEmpty, let number = Double(body), number >= 0, number.isFinite else { return nil }
    let bytes = number * Double(Int64(1) << shift)
    guard bytes < 9.2e18, bytes == bytes.rounded(.down) || shift > 0 else { return nil }
    return Int64(bytes.rounded(.down))
  }

  /// The longest duration a command accepts, in seconds (about 31,700 years): larger ones, which `Duration`
  /// cannot hold past ~1.7e20 s, are refused rather than trapping.
  package static let maxDurationSeconds = 1e12

  /// Whether `seconds` is a duration a command accepts: finite, not negative, at most `maxDurationSeconds`.
  package static func isDuration(_ seconds: Double) -> Bool {
    seconds.isFinite && seconds >= 0 && seconds <= maxDurationSeconds
  }

  /// Seconds from a number with a suffix d, h, m or s (plain numbers are seconds), at most
  /// `maxDurationSeconds`. Nil for anything else.
  package static func parseDuration(_ text: String) -> Double? {
    var body = Substring(text.trimmingCharacters(in: .whitespaces).lowercased())
    let units: [Character: Double] = ["d": 86400, "h": 3600, "m": 60, "s": 1]
    var unit = 1.0
    if let last = body.last, let value = units[last] {
      unit = value
      body = body.dropLast()
    }
    guard !body.isEmpty, let number = Double(body), isDuration(number * unit) else { return nil }
    return number * unit
  }
}
