import Foundation
import Synchronization

/// The `Date` header's value (RFC 9110 §5.6.7 IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), formatted at most
/// once a second: every response carries it (RFC 9110 §6.6.1: an origin server with a clock must send it).
package enum HTTPDate {
  private static let cached = Mutex<(second: Int64, text: String)>((-1, ""))

  /// Now, as IMF-fixdate.
  package static func now() -> String {
    let second = currentSecond
    return cached.withLock { cache in
      if cache.second != second { cache = (second, format(secondsSinceEpoch: second)) }
      return cache.text
    }
  }

  /// The whole seconds since 1970 now: what `now()` formats.
  package static var currentSecond: Int64 { Int64(Date().timeIntervalSince1970.rounded(.down)) }

  /// From Thursday: 1970-01-01 was one.
  private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
  private static let months = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
  ]

  /// `seconds` since 1970-01-01T00:00:00Z (not before it) as IMF-fixdate, by the proleptic Gregorian calendar
  /// (days to civil date as in Howard Hinnant's `civil_from_days`), without a formatter or the C library.
  package static func format(secondsSinceEpoch seconds: Int64) -> String {
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

extension HTTPDate {
  /// Seconds since 1970-01-01T00:00:00Z of an HTTP-date in any of the three forms a recipient must accept
  /// (RFC 9110 §5.6.7): IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, the obsolete RFC 850 form
  /// `Sunday, 06-Nov-94 08:49:37 GMT` (a two-digit year more than 50 years ahead is taken in the past century)
  /// and asctime `Sun Nov  6 08:49:37 1994`; nil for anything else. The weekday is not checked.
  package static func parse(_ text: String) -> Int64? {
    let words = text.split(separator: " ", omittingEmptySubsequences: true)
    let day: Int64
    let month: Int64
    var year: Int64
    let time: Substring
    if words.count == 6, words[0].hasSuffix(","), words[5] == "GMT" {
      // IMF-fixdate.
      guard words[1].count == 2, let parsedDay = Int64(words[1]), let parsedMonth = monthNumber(words[2]),
        words[3].count == 4, let parsedYear = Int64(words[3])
      else { return nil }
      (day, month, year, time) = (parsedDay, parsedMonth, parsedYear, words[4])
    } else if words.count == 4, words[0].hasSuffix(","), words[3] == "GMT" {
      // RFC 850: `06-Nov-94`.
      let parts = words[1].split(separator: "-", omittingEmptySubsequences: false)
      guard parts.count == 3, parts[0].count == 2, let parsedDay = Int64(parts[0]),
        let parsedMonth = monthNumber(parts[1]), parts[2].count == 2, let twoDigits = Int64(parts[2])
      else { return nil }
      let thisYear = Int64(Date().timeIntervalSince1970 / 31_556_952) + 1970
      year = 2000 + twoDigits
      if year > thisYear + 50 { year -= 100 }
      (day, month, time) = (parsedDay, parsedMonth, words[2])
    } else if words.count == 5 {
      // asctime: `Nov  6 08:49:37 1994`.
      guard let parsedMonth = monthNumber(words[1]), (1...2).contains(words[2].count),
        let parsedDay = Int64(words[2]), words[4].count == 4, let parsedYear = Int64(words[4])
      else { return nil }
      (day, month, year, time) = (parsedDay, parsedMonth, parsedYear, words[3])
    } else {
      return nil
    }
    let clock = time.split(separator: ":", omittingEmptySubsequences: false)
    guard clock.count == 3, clock.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
      let hour = Int64(clock[0]), let minute = Int64(clock[1]), let second = Int64(clock[2]),
      (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second), (1...31).contains(day),
      day <= daysIn(month: month, year: year)
    else { return nil }
    return daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
  }

  private static func monthNumber(_ name: Substring) -> Int64? {
    months.firstIndex(of: String(name)).map { Int64($0) + 1 }
  }

  private static func daysIn(month: Int64, year: Int64) -> Int64 {
    switch month {
    case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
    case 4, 6, 9, 11: 30
    default: 31
    }
  }

  /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
  private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
    let shiftedYear = month <= 2 ? year - 1 : year
    let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
    let yearOfEra = shiftedYear - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
  }
}
