import Foundation
import Synchronization

/// The `Date` header's value (RFC 9110 §5.6.7 IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), formatted at most
/// once a second: every response carries it (RFC 9110 §6.6.1: an origin server with a clock must send it).
enum HTTPDate {
  private static let cached = Mutex<(second: Int64, text: String)>((-1, ""))

  /// Now, as IMF-fixdate.
  static func now() -> String {
    let second = Int64(Date().timeIntervalSince1970.rounded(.down))
    return cached.withLock { cache in
      if cache.second != second { cache = (second, format(secondsSinceEpoch: second)) }
      return cache.text
    }
  }

  /// From Thursday: 1970-01-01 was one.
  private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
  private static let months = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
  ]

  /// `seconds` since 1970-01-01T00:00:00Z (not before it) as IMF-fixdate, by the proleptic Gregorian calendar
  /// (days to civil date as in Howard Hinnant's `civil_from_days`), without a formatter or the C library.
  static func format(secondsSinceEpoch seconds: Int64) -> String {
    let days = seconds / 86_400
    let secondOfDay = seconds % 86_400
    let shifted = days + 719_468
    let era = shifted / 146_097
    let dayOfEra = shifted - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthIndex = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
    let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return
      "\(weekdays[Int(days % 7)]), \(two(day)) \(months[Int(month - 1)]) \(year) "
      + "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
  }
}
