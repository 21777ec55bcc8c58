import Foundation
import MediaCache

extension HeadWindow {
  /// The default window of the command-line tools: 5 seconds, the Preloader's target for the next item.
  public static let defaultMediaStart = mediaStart(seconds: 5)

  /// Keeps what a player reads to play an object's first `seconds`: for an MP4 or QuickTime file whose boxes
  /// are cached, the boxes before `moov`, `moov` itself (at the head or the tail) and the samples of every
  /// track up to that time (`MP4StartRanges`, fragments included); for anything else, or an MP4 whose `moov`
  /// is not cached or cannot be used, the first `seconds` at `fallbackBitsPerSecond`. (An HLS or DASH segment
  /// is an object of its own: it is kept or cut by that byte count.)
  public static func mediaStart(seconds: Double, fallbackBitsPerSecond: Double = 4_000_000) -> HeadWindow {
    precondition(seconds >= 0 && seconds.isFinite, "seconds must be finite and not negative")
    precondition(fallbackBitsPerSecond > 0, "fallbackBitsPerSecond must be positive")
    let bytes = Int64((seconds * fallbackBitsPerSecond / 8).rounded(.up))
    let label = seconds.rounded() == seconds ? "\(Int(seconds))" : "\(seconds)"
    return HeadWindow(bytes: bytes, description: "\(label) s of media, else the first \(bytes) bytes") {
      MP4StartRanges.cachedPlan(of: $0, seconds: seconds)?.ranges
    }
  }
}

extension MP4StartRanges {
  /// The plan for an object's first `seconds` from its cached bytes alone; nil when it does not start like an
  /// MP4, a box it needs is not cached, or the file cannot be planned (`MP4Error`).
  static func cachedPlan(of object: CachedObjectBytes, seconds: Double) -> Plan? {
    guard let length = object.contentLength, let head = object.read(0..<min(length, 8)), mayBeMP4(head) else {
      return nil
    }
    var scan = BoxScan(url: "object \(object.id)", fileLength: length, seconds: seconds)
    var step = scan.first
    while true {
      switch step {
      case .read(let range):
        guard let bytes = object.read(range), let next = try? scan.feed(bytes) else { return nil }
        step = next
      case .done(let plan): return plan
      }
    }
  }
}

/// `--keep-heads` of `mediacache proxy|purge` and `cache-compactor`: `5s` (seconds of media,
/// `HeadWindow.mediaStart`), a size (`8M`: the first bytes), or `off`.
package enum HeadWindowArgument {
  /// Why an argument was refused.
  package struct ParseError: Error, CustomStringConvertible {
    /// The argument.
    package var text: String
    package var description: String {
      "--keep-heads '\(text)' is not a window (use seconds of media such as 5s, a size such as 8M, or off)"
    }
  }

  /// The window `text` names; nil for `off` (or 0).
  package static func parse(_ text: String) throws(ParseError) -> HeadWindow? {
    let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
    if trimmed == "off" || trimmed == "0" { return nil }
    if trimmed.hasSuffix("s"), let seconds = Double(trimmed.dropLast()), seconds.isFinite, seconds > 0,
      seconds <= 3600, !trimmed.dropLast().contains(where: { !"0123456789.".contains($0) })
    {
      return .mediaStart(seconds: seconds)
    }
    guard let bytes = HumanUnits.parseSize(trimmed), bytes > 0 else { throw ParseError(text: text) }
    return .bytes(bytes)
  }
}
