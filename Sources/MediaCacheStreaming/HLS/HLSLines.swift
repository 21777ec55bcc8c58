import Foundation

extension HLSPlaylist {
  // MARK: Lines

  /// What a line is (RFC 8216 §4.1).
  enum LineKind {
    /// Empty or only spaces and tabs.
    case blank
    /// Starts with `#` but not `#EXT`.
    case comment
    /// `#EXT...`: the name (up to `:`) and what follows the `:`, if there is one.
    case tag(name: Substring, attributes: Substring?)
    /// Anything else: a URI, without surrounding spaces and tabs.
    case uri(Substring)

    init(_ content: Substring) {
      var line = content
      if line.unicodeScalars.first == "\u{FEFF}" { line = line.dropFirst() }
      let scalars = line.unicodeScalars
      guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }) else {
        self = .blank
        return
      }
      if scalars[first] == "#" {
        guard line.hasPrefix("#EXT") else {
          self = .comment
          return
        }
        if let colon = scalars.firstIndex(of: ":") {
          self = .tag(name: line[line.startIndex..<colon], attributes: line[scalars.index(after: colon)...])
        } else {
          self = .tag(name: line.trimmingSuffix(), attributes: nil)
        }
        return
      }
      let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })!
      self = .uri(line[first...last])
    }
  }

  /// The lines of a playlist: content without its line ending, the ending as written (`\n`, `\r\n` or
  /// nothing for a last line without one), and the 1-based line number.
  struct Lines: Sequence, IteratorProtocol {
    private let text: String
    private var position: String.Index
    private var number = 0

    init(_ text: String) {
      self.text = text
      position = text.startIndex
    }

    mutating func next() -> (content: Substring, terminator: String, number: Int)? {
      let utf8 = text.utf8
      guard position < utf8.endIndex else { return nil }
      number += 1
      let start = position
      guard let newline = utf8[start...].firstIndex(of: UInt8(ascii: "\n")) else {
        position = utf8.endIndex
        return (text[start..<utf8.endIndex], "", number)
      }
      position = utf8.index(after: newline)
      if newline > start, utf8[utf8.index(before: newline)] == UInt8(ascii: "\r") {
        return (text[start..<utf8.index(before: newline)], "\r\n", number)
      }
      return (text[start..<newline], "\n", number)
    }
  }
}
