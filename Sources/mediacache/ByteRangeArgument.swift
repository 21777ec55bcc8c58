import ArgumentParser

/// An inclusive byte range `START-END`, or `START-` for the rest of the object.
struct ByteRangeArgument: ExpressibleByArgument {
  var start: Int64
  var end: Int64?

  init?(argument: String) {
    let parts = argument.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, let start = Int64(parts[0]), start >= 0 else { return nil }
    self.start = start
    if parts[1].isEmpty {
      end = nil
    } else {
      guard let end = Int64(parts[1]), end >= start else { return nil }
      self.end = end
    }
  }

  /// The half-open range, with an open end resolved against `length`.
  func resolved(length: Int64?) -> Range<Int64>? {
    if let end { return start..<(end + 1) }
    guard let length else { return nil }
    return start..<max(start, length)
  }

  static var defaultCompletionKind: CompletionKind { .default }
}
