extension Substring {
  /// The text before the first `separator` and the text after it (nil when there is no separator): a request
  /// target's path and query, a DASH template identifier's name and format tag.
  package func splitOnce(at separator: Character) -> (before: Substring, after: Substring?) {
    guard let index = firstIndex(of: separator) else { return (self, nil) }
    return (self[..<index], self[self.index(after: index)...])
  }
}
