/// The media type of a `Content-Type` value, compared over its UTF-8 bytes: the checks that run for every
/// response (is it a playlist, an MPD?) build no string and allocate nothing.
enum MediaType {
  /// Whether the media type of `contentType` (before any parameters such as `; charset=utf-8`, without the
  /// spaces and tabs around it) is one of `candidates` (given in lower case), ignoring ASCII case.
  static func of(_ contentType: String?, isOneOf candidates: some Sequence<String>) -> Bool {
    guard let contentType else { return false }
    let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    let mediaType = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
    let trimmed = mediaType.drop(while: isBlank).reversed().drop(while: isBlank).reversed()
    let count = trimmed.count
    return candidates.contains { candidate in
      candidate.utf8.count == count
        && zip(trimmed, candidate.utf8).allSatisfy { (0x41...0x5A).contains($0) ? $0 | 0x20 == $1 : $0 == $1 }
    }
  }
}
