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

  /// The tags whose `URI="..."` attribute `rewrite` replaces.
  public static let uriAttributeTags: Set<String> = [
    "#EXT-X-KEY", "#EXT-X-SESSION-KEY", "#EXT-X-MAP", "#EXT-X-MEDIA", "#EXT-X-I-FRAME-STREAM-INF",
    "#EXT-X-PART", "#EXT-X-PRELOAD-HINT", "#EXT-X-RENDITION-REPORT", "#EXT-X-SESSION-DATA",
  ]

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
    if let contentType {
      // The media type before any parameters, without spaces or tabs around it, in lower case (ASCII only:
      // Foundation's trimming costs more than the rest of this check).
      let mediaType = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
      let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
      let trimmed = mediaType.drop(while: isBlank).reversed().drop(while: isBlank).reversed()
      let lowered = String(
        decoding: trimmed.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
      if contentTypes.contains(lowered) { return true }
    }
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
  private static func mayNamePlaylist(_ bytes: String.UTF8View) -> Bool {
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

  // MARK: Rewriting

  /// The playlist with every URI replaced by `transform(absoluteURL)`, everything else byte for byte as it was.
  ///
  /// Replaced are the URI lines (lines that are not blank and do not start with `#`; whitespace around the URI
  /// is kept) and the `URI="..."` attribute of the tags in `uriAttributeTags`. Each URI is resolved against
  /// `playlistURL` first; only `http` and `https` targets are replaced, any other (`skd://`, `data:`, `urn:`)
  /// is left exactly as written. Comments, other tags and attributes, their order, blank lines, the line
  /// endings (LF or CRLF, per line), a byte order mark and the presence of a final line ending are kept.
  ///
  /// A URI for which `keep` (given the URI as written, without surrounding whitespace) answers true is left as
  /// written; the proxy keeps relative references of a playlist requested in path form, which resolve to
  /// proxied URLs as they are.
  ///
  /// The transform's result is written as is, so it must be a percent-encoded URL. It is checked, not escaped:
  /// a result that is empty, starts with `#`, or contains `"` or a control character (CR, LF, ...) would change
  /// the playlist's structure, and makes the call throw `HLSError.invalidReplacement`.
  ///
  /// - Throws: `HLSError.tooLarge` above `maxPlaylistBytes`, `.notAPlaylist` without an `#EXTM3U` first line,
  ///   `.malformedLine` for a URI-bearing tag whose attribute list cannot be parsed, `.unresolvableURI` for a
  ///   URI that cannot be resolved, `.invalidReplacement` as above.
  public static func rewrite(
    _ text: String, playlistURL: URL, keeping keep: (String) -> Bool = { _ in false },
    transform: (URL) -> String
  ) throws(HLSError) -> String {
    let source = playlistURL.absoluteString
    try checkSize(text, url: source)
    if text.isEmpty { throw .notAPlaylist(url: source, firstLine: "") }
    var output = ""
    output.reserveCapacity(text.utf8.count + text.utf8.count / 4)
    for line in Lines(text) {
      let content = line.content
      if line.number == 1 { try checkHeader(content, url: source) }
      let replaced: String?
      switch LineKind(content) {
      case .blank, .comment:
        replaced = nil
      case .tag(let name, let attributes):
        guard uriAttributeTags.contains(String(name)), let attributes else {
          replaced = nil
          break
        }
        let list = try attributeList(attributes, line: line.number, url: source)
        guard let uri = list.first(where: { $0.name == "URI" }) else {
          replaced = nil
          break
        }
        guard uri.isQuoted else {
          throw .malformedLine(url: source, line: line.number, reason: "URI is not a quoted string")
        }
        replaced = try replacement(
          for: uri.value, in: content, line: line.number, playlistURL: playlistURL, keep: keep,
          transform: transform)
      case .uri(let uri):
        replaced = try replacement(
          for: uri, in: content, line: line.number, playlistURL: playlistURL, keep: keep, transform: transform
        )
      }
      output += replaced ?? String(content)
      output += line.terminator
    }
    return output
  }

  /// `content` with `uri` (a slice of it) replaced, or nil when the URI's target is not http or https or
  /// `keep` keeps it.
  private static func replacement(
    for uri: Substring, in content: Substring, line: Int, playlistURL: URL, keep: (String) -> Bool,
    transform: (URL) -> String
  ) throws(HLSError) -> String? {
    guard let target = try resolve(uri, against: playlistURL, line: line), isHTTP(target) else { return nil }
    if keep(uri.trimmingCharacters(in: .whitespaces)) { return nil }
    let new = transform(target)
    if let problem = replacementProblem(new) {
      throw .invalidReplacement(url: playlistURL.absoluteString, line: line, reason: problem)
    }
    return String(content[content.startIndex..<uri.startIndex]) + new
      + String(content[uri.endIndex..<content.endIndex])
  }

  /// Why `replacement` cannot be written into a playlist line, or nil if it can.
  private static func replacementProblem(_ replacement: String) -> String? {
    if replacement.isEmpty { return "the transform returned an empty string" }
    if replacement.hasPrefix("#") {
      return "the transform's result starts with '#' (\(replacement.prefix(80)))"
    }
    for scalar in replacement.unicodeScalars
    where scalar == "\"" || scalar.value < 0x20 || scalar.value == 0x7F {
      let shown = scalar == "\"" ? "'\"'" : String(format: "U+%04X", scalar.value)
      return
        "the transform's result contains \(shown), which would break the line (\(replacement.prefix(80)))"
    }
    return nil
  }

  // MARK: Parsing

  /// What a playlist lists.
  public enum Playlist: Sendable, Equatable {
    /// A master (multivariant) playlist: its `EXT-X-STREAM-INF` variants in playlist order.
    case master([Variant])
    /// A media playlist.
    case media(MediaPlaylist)
  }

  /// One `EXT-X-STREAM-INF` variant of a master playlist.
  public struct Variant: Sendable, Equatable {
    /// The variant's media playlist, absolute.
    public var uri: URL
    /// `BANDWIDTH`, bits per second.
    public var bandwidth: Int?
    /// `RESOLUTION`, as written (`1280x720`).
    public var resolution: String?
    /// `CODECS`, as written.
    public var codecs: String?
    /// The `AUDIO` group's `EXT-X-MEDIA` renditions that have a URI, absolute, in playlist order.
    public var audioRenditions: [URL]
    /// The `SUBTITLES` group's `EXT-X-MEDIA` renditions that have a URI, absolute, in playlist order.
    public var subtitleRenditions: [URL]

    /// A variant with these fields.
    public init(
      uri: URL, bandwidth: Int? = nil, resolution: String? = nil, codecs: String? = nil,
      audioRenditions: [URL] = [], subtitleRenditions: [URL] = []
    ) {
      self.uri = uri
      self.bandwidth = bandwidth
      self.resolution = resolution
      self.codecs = codecs
      self.audioRenditions = audioRenditions
      self.subtitleRenditions = subtitleRenditions
    }
  }

  /// A media playlist: its segments and what they need (read-only: `allURIs` depends on where each key and
  /// map appeared).
  public struct MediaPlaylist: Sendable, Equatable {
    /// The segment URIs in playlist order, absolute (a URI repeated with `EXT-X-BYTERANGE` appears each time).
    public internal(set) var segments: [URL]
    /// The distinct http and https `EXT-X-KEY` URIs, absolute, in order of first appearance.
    public internal(set) var keys: [URL]
    /// The distinct http and https `EXT-X-MAP` URIs, absolute, in order of first appearance.
    public internal(set) var maps: [URL]
    /// `EXT-X-TARGETDURATION`, seconds.
    public internal(set) var targetDuration: Int?
    /// Whether the playlist has `EXT-X-ENDLIST` (no more segments will be added).
    public internal(set) var isEndList: Bool
    /// For each key and map URI, the number of segments listed before it (where it is first needed).
    var prerequisites: [Prerequisite]

    struct Prerequisite: Sendable, Equatable {
      var beforeSegment: Int
      var uri: URL
    }

    /// Every distinct URI to fetch, in fetch order: each key and map before the first segment that needs it,
    /// the segments in playlist order, each URI once.
    public var allURIs: [URL] {
      var seen = Set<String>()
      var result: [URL] = []
      var pending = prerequisites[...]
      func add(_ url: URL) { if seen.insert(HLSPlaylist.resource(url)).inserted { result.append(url) } }
      for (index, segment) in segments.enumerated() {
        while let next = pending.first, next.beforeSegment <= index {
          add(next.uri)
          pending = pending.dropFirst()
        }
        add(segment)
      }
      for rest in pending { add(rest.uri) }
      return result
    }
  }

  /// Reads a playlist: a master playlist (one with `EXT-X-STREAM-INF`) gives its variants, any other its
  /// segments, keys and maps. Every URI is resolved against `playlistURL`.
  ///
  /// I-frame playlists (`EXT-X-I-FRAME-STREAM-INF`) are not variants and are not listed.
  ///
  /// - Throws: `HLSError.tooLarge` above `maxPlaylistBytes`, `.notAPlaylist` without an `#EXTM3U` first line,
  ///   `.malformedLine` for a line that breaks RFC 8216 in a way that matters here (an attribute list that
  ///   cannot be parsed, a variant without a URI line, a key or map without a URI, a non-numeric duration, a
  ///   playlist mixing master and media tags), `.unresolvableURI` for a URI that cannot be resolved.
  public static func parse(_ text: String, playlistURL: URL) throws(HLSError) -> Playlist {
    let source = playlistURL.absoluteString
    try checkSize(text, url: source)
    if text.isEmpty { throw .notAPlaylist(url: source, firstLine: "") }
    var lines: [(number: Int, kind: LineKind)] = []
    var isMaster = false
    for line in Lines(text) {
      if line.number == 1 { try checkHeader(line.content, url: source) }
      let kind = LineKind(line.content)
      if case .tag(let name, _) = kind, name == "#EXT-X-STREAM-INF" { isMaster = true }
      lines.append((line.number, kind))
    }
    return isMaster
      ? .master(try parseMaster(lines, playlistURL: playlistURL))
      : .media(try parseMedia(lines, playlistURL: playlistURL))
  }

  private static func parseMaster(_ lines: [(number: Int, kind: LineKind)], playlistURL: URL)
    throws(HLSError) -> [Variant]
  {
    let source = playlistURL.absoluteString
    struct Pending {
      var line: Int
      var attributes: [Attribute]
    }
    struct Rendition {
      var type: Substring
      var group: Substring
      var uri: URL
    }
    var pending: Pending?
    var variants: [(variant: Variant, audio: Substring?, subtitles: Substring?)] = []
    var renditions: [Rendition] = []
    for (number, kind) in lines {
      switch kind {
      case .blank, .comment: continue
      case .tag(let name, let attributes):
        switch name {
        case "#EXT-X-STREAM-INF":
          if let pending {
            throw .malformedLine(
              url: source, line: number,
              reason: "#EXT-X-STREAM-INF follows the one on line \(pending.line) without a URI line between")
          }
          pending = Pending(
            line: number, attributes: try attributeList(attributes ?? "", line: number, url: source))
        case "#EXT-X-MEDIA":
          let list = try attributeList(attributes ?? "", line: number, url: source)
          guard let type = list.value("TYPE"), let group = list.value("GROUP-ID") else {
            throw .malformedLine(url: source, line: number, reason: "#EXT-X-MEDIA needs TYPE and GROUP-ID")
          }
          if let uri = list.value("URI"),
            let resolved = try resolve(uri, against: playlistURL, line: number)
          {
            renditions.append(Rendition(type: type, group: group, uri: resolved))
          }
        case "#EXTINF", "#EXT-X-TARGETDURATION":
          throw .malformedLine(
            url: source, line: number,
            reason:
              "\(name) is a media playlist tag, but this is a master playlist (it has #EXT-X-STREAM-INF)")
        default: continue
        }
      case .uri(let uri):
        guard let current = pending else {
          throw .malformedLine(
            url: source, line: number, reason: "URI line without a #EXT-X-STREAM-INF before it")
        }
        pending = nil
        guard let resolved = try resolve(uri, against: playlistURL, line: number) else {
          throw .unresolvableURI(url: source, line: number, uri: String(uri))
        }
        let list = current.attributes
        var bandwidth: Int?
        if let text = list.value("BANDWIDTH") {
          guard let value = Int(text), value >= 0 else {
            throw .malformedLine(
              url: source, line: current.line, reason: "BANDWIDTH \(text) is not a decimal integer")
          }
          bandwidth = value
        }
        let variant = Variant(
          uri: resolved, bandwidth: bandwidth, resolution: list.value("RESOLUTION").map(String.init),
          codecs: list.value("CODECS").map(String.init))
        variants.append((variant, list.value("AUDIO"), list.value("SUBTITLES")))
      }
    }
    if let pending {
      throw .malformedLine(
        url: source, line: pending.line, reason: "#EXT-X-STREAM-INF is not followed by a URI line")
    }
    return variants.map { entry in
      var variant = entry.variant
      variant.audioRenditions = renditions.filter { $0.type == "AUDIO" && $0.group == entry.audio }.map(\.uri)
      variant.subtitleRenditions = renditions.filter { $0.type == "SUBTITLES" && $0.group == entry.subtitles }
        .map(\.uri)
      return variant
    }
  }

  /// What a URI names, for telling URIs apart: two that differ only where RFC 3986 says they are the same (the
  /// scheme's case, dot segments) name one resource, which the proxy serves as one object (its path form), and
  /// which `fetch --hls` fetches once.
  static func resource(_ url: URL) -> String {
    ProxyPathForm.path(for: url.absoluteString) ?? url.absoluteString
  }

  private static func parseMedia(_ lines: [(number: Int, kind: LineKind)], playlistURL: URL)
    throws(HLSError) -> MediaPlaylist
  {
    let source = playlistURL.absoluteString
    var playlist = MediaPlaylist(
      segments: [], keys: [], maps: [], targetDuration: nil, isEndList: false, prerequisites: [])
    /// The resources among the keys, and among the maps (a set each: a hostile playlist may list many).
    var keyResources = Set<String>()
    var mapResources = Set<String>()
    /// Records a key (or map) the segments from here on need, once.
    func need(_ url: URL, isKey: Bool) {
      guard isHTTP(url) else { return }
      let resource = Self.resource(url)
      let added = isKey ? keyResources.insert(resource).inserted : mapResources.insert(resource).inserted
      guard added else { return }
      if isKey { playlist.keys.append(url) } else { playlist.maps.append(url) }
      playlist.prerequisites.append(.init(beforeSegment: playlist.segments.count, uri: url))
    }
    for (number, kind) in lines {
      switch kind {
      case .blank, .comment: continue
      case .tag(let name, let attributes):
        let value = attributes ?? ""
        switch name {
        case "#EXT-X-TARGETDURATION":
          guard let seconds = Int(value.trimmingCharacters(in: .whitespaces)), seconds >= 0 else {
            throw .malformedLine(
              url: source, line: number, reason: "#EXT-X-TARGETDURATION '\(value)' is not a decimal integer")
          }
          playlist.targetDuration = seconds
        case "#EXTINF":
          let duration = value.prefix { $0 != "," }.trimmingCharacters(in: .whitespaces)
          guard let seconds = Double(duration), seconds >= 0, seconds.isFinite else {
            throw .malformedLine(
              url: source, line: number, reason: "#EXTINF duration '\(duration)' is not a decimal number")
          }
        case "#EXT-X-ENDLIST":
          playlist.isEndList = true
        case "#EXT-X-KEY":
          let list = try attributeList(value, line: number, url: source)
          guard let method = list.value("METHOD") else {
            throw .malformedLine(url: source, line: number, reason: "#EXT-X-KEY has no METHOD")
          }
          guard method != "NONE" else { continue }
          guard let uri = list.value("URI") else {
            throw .malformedLine(
              url: source, line: number, reason: "#EXT-X-KEY with METHOD=\(method) has no URI")
          }
          if let resolved = try resolve(uri, against: playlistURL, line: number) {
            need(resolved, isKey: true)
          }
        case "#EXT-X-MAP":
          let list = try attributeList(value, line: number, url: source)
          guard let uri = list.value("URI") else {
            throw .malformedLine(url: source, line: number, reason: "#EXT-X-MAP has no URI")
          }
          if let resolved = try resolve(uri, against: playlistURL, line: number) {
            need(resolved, isKey: false)
          }
        default: continue
        }
      case .uri(let uri):
        guard let resolved = try resolve(uri, against: playlistURL, line: number) else {
          throw .unresolvableURI(url: source, line: number, uri: String(uri))
        }
        playlist.segments.append(resolved)
      }
    }
    return playlist
  }

  // MARK: Shared pieces

  package static let header = "#EXTM3U"
  private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

  private static func checkSize(_ text: String, url: String) throws(HLSError) {
    let count = text.utf8.count
    if count > maxPlaylistBytes { throw .tooLarge(url: url, bytes: count, limit: maxPlaylistBytes) }
  }

  private static func checkHeader(_ firstLine: Substring, url: String) throws(HLSError) {
    var line = firstLine
    if line.unicodeScalars.first == "\u{FEFF}" { line = line.dropFirst() }
    let trimmed = line.trimmingCharacters(in: .whitespaces)
    guard trimmed == header else { throw .notAPlaylist(url: url, firstLine: String(firstLine.prefix(80))) }
  }

  /// `uri` resolved against the playlist's URL; nil for an empty URI. An http or https result without a host
  /// counts as unresolvable.
  private static func resolve(_ uri: Substring, against base: URL, line: Int) throws(HLSError) -> URL? {
    let trimmed = uri.trimmingCharacters(in: .whitespaces)
    guard let resolved = URL(string: trimmed, relativeTo: base)?.absoluteURL,
      !isHTTP(resolved) || !(resolved.host ?? "").isEmpty
    else {
      throw .unresolvableURI(url: base.absoluteString, line: line, uri: String(uri))
    }
    return resolved
  }

  private static func isHTTP(_ url: URL) -> Bool {
    let scheme = url.scheme?.lowercased()
    return scheme == "http" || scheme == "https"
  }

  private static func attributeList(_ text: Substring, line: Int, url: String) throws(HLSError) -> [Attribute]
  {
    do {
      return try parseAttributeList(text)
    } catch {
      throw .malformedLine(url: url, line: line, reason: error.reason)
    }
  }

  // MARK: Attribute lists

  /// One `NAME=VALUE` of an attribute list; for a quoted string, `value` is the text between the quotes.
  struct Attribute: Equatable {
    var name: Substring
    var value: Substring
    var isQuoted: Bool
  }

  /// Why an attribute list could not be parsed.
  struct AttributeListError: Error, Equatable {
    var reason: String
  }

  /// Parses an attribute list (RFC 8216 §4.2): comma-separated `NAME=VALUE`, where a value is a quoted string
  /// (which may hold commas, never `"`, CR or LF) or runs to the next comma. Spaces around attributes and a
  /// trailing comma are tolerated; a missing `=`, an empty name or value, an unterminated quoted string or a
  /// repeated name is an error. The values are slices of `text`.
  static func parseAttributeList(_ text: Substring) throws(AttributeListError) -> [Attribute] {
    var attributes: [Attribute] = []
    var names = Set<Substring>()  // a playlist line can hold megabytes of attributes: no pairwise comparison
    let scalars = text.unicodeScalars
    var index = scalars.startIndex
    func skipSpaces() {
      while index < scalars.endIndex, scalars[index] == " " || scalars[index] == "\t" {
        scalars.formIndex(after: &index)
      }
    }
    func isNameScalar(_ scalar: Unicode.Scalar) -> Bool {
      switch scalar {
      case "A"..."Z", "a"..."z", "0"..."9", "-", "_": true
      default: false
      }
    }
    while true {
      skipSpaces()
      if index == scalars.endIndex { break }
      let nameStart = index
      while index < scalars.endIndex, isNameScalar(scalars[index]) { scalars.formIndex(after: &index) }
      let name = text[nameStart..<index]
      guard !name.isEmpty else {
        throw AttributeListError(
          reason: "expected an attribute name at '\(text[nameStart...].prefix(20))'")
      }
      guard index < scalars.endIndex, scalars[index] == "=" else {
        throw AttributeListError(reason: "attribute \(name) has no '='")
      }
      scalars.formIndex(after: &index)
      let attribute: Attribute
      if index < scalars.endIndex, scalars[index] == "\"" {
        scalars.formIndex(after: &index)
        let valueStart = index
        while index < scalars.endIndex, scalars[index] != "\"" { scalars.formIndex(after: &index) }
        guard index < scalars.endIndex else {
          throw AttributeListError(reason: "the quoted value of \(name) has no closing '\"'")
        }
        attribute = Attribute(name: name, value: text[valueStart..<index], isQuoted: true)
        scalars.formIndex(after: &index)
      } else {
        let valueStart = index
        while index < scalars.endIndex, scalars[index] != "," { scalars.formIndex(after: &index) }
        var value = text[valueStart..<index]
        while let last = value.unicodeScalars.last, last == " " || last == "\t" {
          value = value[value.startIndex..<value.unicodeScalars.index(before: value.endIndex)]
        }
        guard !value.isEmpty else { throw AttributeListError(reason: "attribute \(name) has an empty value") }
        attribute = Attribute(name: name, value: value, isQuoted: false)
      }
      guard names.insert(name).inserted else {
        throw AttributeListError(reason: "attribute \(name) appears twice")
      }
      attributes.append(attribute)
      skipSpaces()
      if index == scalars.endIndex { break }
      guard scalars[index] == "," else {
        throw AttributeListError(
          reason: "unexpected '\(text[index...].prefix(20))' after the value of \(name) (expected ',')")
      }
      scalars.formIndex(after: &index)
    }
    return attributes
  }

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

extension [HLSPlaylist.Attribute] {
  /// The value of the attribute named `name`, if present.
  fileprivate func value(_ name: String) -> Substring? { first { $0.name == name }?.value }
}

extension Substring {
  fileprivate func trimmingSuffix() -> Substring {
    var result = self
    while let last = result.unicodeScalars.last, last == " " || last == "\t" {
      result = result[result.startIndex..<result.unicodeScalars.index(before: result.endIndex)]
    }
    return result
  }
}

/// Why a playlist cannot be read or rewritten. Each case names the playlist's URL and, where there is one,
/// the 1-based line.
public enum HLSError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The first line is not `#EXTM3U` (after an optional byte order mark); `firstLine` is its first 80
  /// characters.
  case notAPlaylist(url: String, firstLine: String)
  /// A line breaks the playlist format in a way that matters (see `HLSPlaylist.parse`).
  case malformedLine(url: String, line: Int, reason: String)
  /// A URI that cannot be resolved against the playlist's URL (not a URI reference, or an http URL without a
  /// host).
  case unresolvableURI(url: String, line: Int, uri: String)
  /// The playlist is longer than `HLSPlaylist.maxPlaylistBytes`.
  case tooLarge(url: String, bytes: Int, limit: Int)
  /// `rewrite`'s transform returned something that cannot stand in a playlist line.
  case invalidReplacement(url: String, line: Int, reason: String)

  public var description: String {
    switch self {
    case .notAPlaylist(let url, let firstLine):
      "\(url) is not an HLS playlist: its first line is '\(firstLine)', not #EXTM3U"
    case .malformedLine(let url, let line, let reason): "\(url) line \(line): \(reason)"
    case .unresolvableURI(let url, let line, let uri):
      "\(url) line \(line): URI '\(uri.prefix(200))' cannot be resolved against the playlist's URL"
    case .tooLarge(let url, let bytes, let limit):
      "\(url): playlist of \(bytes) bytes is larger than the limit of \(limit) bytes"
    case .invalidReplacement(let url, let line, let reason):
      "\(url) line \(line): cannot rewrite the URI: \(reason)"
    }
  }
}
