extension String {
  /// The string without the spaces and tabs (HTTP's optional whitespace) at either end, found in its UTF-8 in
  /// linear time: an `If-None-Match` member, a configured origin header's value. (Both ends of
  /// the result are next to an ASCII byte or an end, so they are scalar boundaries.)
  package func trimmingSpaces() -> String {
    let utf8 = self.utf8
    func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    guard let first = utf8.firstIndex(where: { !isSpace($0) }),
      let last = utf8.lastIndex(where: { !isSpace($0) })
    else { return "" }
    return String(self[first..<utf8.index(after: last)])
  }
}
