extension Substring {
  /// The text before the first `separator` and the text after it (nil when there is no separator): a request
  /// target's path and query, a DASH template identifier's name and format tag.
  ///
  /// Found by bytes, not characters: `?` followed by a combining mark is one `Character` that is not `?`, but
  /// the `?` still ends the path. `separator` must be ASCII.
  package func splitOnce(at separator: Unicode.Scalar) -> (before: Substring, after: Substring?) {
    precondition(separator.isASCII, "splitOnce separates at an ASCII byte")
    guard let index = utf8.firstIndex(of: UInt8(separator.value)) else { return (self, nil) }
    return (self[..<index], self[utf8.index(after: index)...])
  }

  /// Whether the text starts with a `/` byte (a `/` followed by a combining mark is one `Character` that
  /// `hasPrefix("/")` does not match, but it is still a slash in a URI).
  var startsWithSlash: Bool { utf8.first == UInt8(ascii: "/") }

  /// The text after its first byte (the first byte being ASCII, such as a leading `/`).
  var droppingFirstByte: Substring { self[utf8.index(after: startIndex)...] }
}
