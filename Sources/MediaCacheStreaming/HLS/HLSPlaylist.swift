import Foundation

/// HLS playlists (RFC 8216): recognising them, rewriting every URI in them, and reading the variants of a
/// master playlist or the segments of a media playlist.
///
/// Playlists are UTF-8 text of lines ended by LF or CRLF. Every URI is resolved against the playlist's own URL
/// (RFC 3986), as a player resolves it. Only the first `maxPlaylistBytes` bytes of a response should be read;
/// longer text is refused with `HLSError.tooLarge`.
public enum HLSPlaylist {
  /// The largest playlist accepted (8 MiB). Real playlists are kilobytes, even a day-long live window is
  /// about a megabyte; callers should stop reading a body past this many bytes and fail.
  public static let maxPlaylistBytes = 8 << 20

  /// The content types (lowercased, without parameters) that name an HLS playlist.
  public static let contentTypes: Set<String> = [
    "application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl",
  ]

  /// The tags one of whose quoted attributes holds a URI that `rewrite` replaces, with the names that attribute
  /// may have: `URI` for most; the content steering manifest's `SERVER-URI`; an interstitial's `X-ASSET-URI` or
  /// `X-ASSET-LIST` (an `EXT-X-DATERANGE` has one of the two); a Roku image stream's `URI`. A line's first
  /// attribute of one of those names is its URI.
  public static let uriAttributes: [String: Set<String>] = [
    "#EXT-X-KEY": ["URI"], "#EXT-X-SESSION-KEY": ["URI"], "#EXT-X-MAP": ["URI"], "#EXT-X-MEDIA": ["URI"],
    "#EXT-X-I-FRAME-STREAM-INF": ["URI"], "#EXT-X-PART": ["URI"], "#EXT-X-PRELOAD-HINT": ["URI"],
    "#EXT-X-RENDITION-REPORT": ["URI"], "#EXT-X-SESSION-DATA": ["URI"], "#EXT-X-IMAGE-STREAM-INF": ["URI"],
    "#EXT-X-CONTENT-STEERING": ["SERVER-URI"], "#EXT-X-DATERANGE": ["X-ASSET-URI", "X-ASSET-LIST"],
  ]

  /// The tags of `uriAttributes`.
  public static let uriAttributeTags: Set<String> = Set(uriAttributes.keys)

  // MARK: Recognising

  /// Whether a response is an HLS playlist: its content type is one of `contentTypes` (case-insensitive,
  /// parameters such as `; charset=utf-8` ignored), or the URL's path ends with `.m3u8` or `.m3u` and the body
  /// starts with `#EXTM3U` (after an optional UTF-8 byte order mark).
  ///
  /// - Parameters:
  ///   - contentType: The response's `Content-Type`, if any.
  ///   - url: The URL the response is for.
  ///   - prefix: The first bytes of the body (10 are enough).
  public static func isPlaylist(contentType: String?, url: String, prefix: some Collection<UInt8>) -> Bool {
    if MediaType.of(contentType, isOneOf: contentTypes) { return true }
    // Without "m3u" anywhere (any case, escapes aside) the path cannot end in .m3u8 or .m3u: no need to parse
    // the URL, which is most of this function's cost for every other response.
    guard Self.mayNamePlaylist(url.utf8) else { return false }
    let path =
      URLComponents(string: url)?.path
      ?? String(url.prefix { $0 != "?" && $0 != "#" })
    let lowered = path.lowercased()
    guard lowered.hasSuffix(".m3u8") || lowered.hasSuffix(".m3u") else { return false }
    var bytes = prefix[...]
    if bytes.starts(with: byteOrderMark) { bytes = bytes.dropFirst(byteOrderMark.count) }
    return bytes.starts(with: Array(header.utf8))
  }

  /// Whether the URL may name a `.m3u8`/`.m3u` path: it contains "m3u" in any case, or a `%` (an escape may
  /// spell it).
  static func mayNamePlaylist(_ bytes: String.UTF8View) -> Bool {
    var matched = 0
    for byte in bytes {
      if byte == UInt8(ascii: "%") { return true }
      let lower = byte | 0x20
      switch matched {
      case 0: matched = lower == UInt8(ascii: "m") ? 1 : 0
      case 1: matched = byte == UInt8(ascii: "3") ? 2 : (lower == UInt8(ascii: "m") ? 1 : 0)
      default:
        if lower == UInt8(ascii: "u") { return true }
        matched = lower == UInt8(ascii: "m") ? 1 : 0
      }
    }
    return false
  }

  // MARK: Shared pieces

  package static let header = "#EXTM3U"
  private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

  static func checkSize(_ text: String, url: String) throws(HLSError) {
    let count = text.utf8.count
    if count > maxPlaylistBytes { throw .tooLarge(url: url, bytes: count, limit: maxPlaylistBytes) }
  }

  static func checkHeader(_ firstLine: Substring, url: String) throws(HLSError) {
    var line = firstLine
    if line.unicodeScalars.first == "\u{FEFF}" { line = line.dropFirst() }
    let trimmed = line.trimmingCharacters(in: .whitespaces)
    guard trimmed == header else { throw .notAPlaylist(url: url, firstLine: String(firstLine.prefix(80))) }
  }

  /// `uri` resolved against the playlist's URL; nil for an empty URI. An http or https result without a host
  /// counts as unresolvable.
  static func resolve(_ uri: Substring, against base: URL, line: Int) throws(HLSError) -> URL? {
    let trimmed = uri.trimmingCharacters(in: .whitespaces)
    guard let resolved = URL(string: trimmed, relativeTo: base)?.absoluteURL,
      !isHTTP(resolved) || !(resolved.host ?? "").isEmpty
    else {
      throw .unresolvableURI(url: base.absoluteString, line: line, uri: String(uri))
    }
    return resolved
  }

  static func isHTTP(_ url: URL) -> Bool {
    let scheme = url.scheme?.lowercased()
    return scheme == "http" || scheme == "https"
  }

  static func attributeList(_ text: Substring, line: Int, url: String) throws(HLSError) -> [Attribute] {
    do {
      return try parseAttributeList(text)
    } catch {
      throw .malformedLine(url: url, line: line, reason: error.reason)
    }
  }
}
