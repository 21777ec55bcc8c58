import Foundation

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

  /// The text with its `%XX` escapes decoded; nil if an escape is malformed or the result is not UTF-8. The
  /// same as Foundation's `removingPercentEncoding` (tested), without its CFString round trip per call; text
  /// that is not all ASCII (rare in a request target) is left to Foundation.
  package var percentDecoded: String? {
    guard utf8.contains(UInt8(ascii: "%")) else { return String(self) }
    guard utf8.allSatisfy({ $0 < 0x80 }) else { return removingPercentEncoding }
    func hexValue(_ byte: UInt8) -> UInt8? {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
      default: nil
      }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var index = utf8.startIndex
    while index != utf8.endIndex {
      let byte = utf8[index]
      utf8.formIndex(after: &index)
      guard byte == UInt8(ascii: "%") else {
        bytes.append(byte)
        continue
      }
      guard index != utf8.endIndex, let high = hexValue(utf8[index]) else { return nil }
      utf8.formIndex(after: &index)
      guard index != utf8.endIndex, let low = hexValue(utf8[index]) else { return nil }
      utf8.formIndex(after: &index)
      bytes.append(high << 4 | low)
    }
    return String(validating: bytes, as: UTF8.self)
  }
}
