import Foundation

extension HLSPlaylist {
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
    /// The `AUDIO` group's `EXT-X-MEDIA` renditions that have a URI, absolute: the `DEFAULT=YES` one first,
    /// the others in playlist order.
    public var audioRenditions: [URL]
    /// The `SUBTITLES` group's `EXT-X-MEDIA` renditions that have a URI, absolute: the `DEFAULT=YES` one
    /// first, the others in playlist order.
    public var subtitleRenditions: [URL]
    /// The audio a player plays with the variant when nothing chooses another: the `AUDIO` group's
    /// `DEFAULT=YES` rendition's URI (nil when it has none: that audio is in the variant's own segments), else
    /// the group's first rendition with a URI; nil without a group.
    public var defaultAudio: URL?

    /// A variant with these fields.
    public init(
      uri: URL, bandwidth: Int? = nil, resolution: String? = nil, codecs: String? = nil,
      audioRenditions: [URL] = [], subtitleRenditions: [URL] = [], defaultAudio: URL? = nil
    ) {
      self.uri = uri
      self.bandwidth = bandwidth
      self.resolution = resolution
      self.codecs = codecs
      self.audioRenditions = audioRenditions
      self.subtitleRenditions = subtitleRenditions
      self.defaultAudio = defaultAudio
    }
  }

  /// A media playlist: its segments and what they need (read-only: `allURIs` depends on where each key and
  /// map appeared).
  public struct MediaPlaylist: Sendable, Equatable {
    /// The segment URIs in playlist order, absolute (a URI repeated with `EXT-X-BYTERANGE` appears each time).
    public internal(set) var segments: [URL]
    /// Each segment's `EXTINF` duration in seconds (0 where it has none), in the order of `segments`.
    public internal(set) var segmentDurations: [Double] = []
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
    public var allURIs: [URL] { uris(segments: segments.count, trailing: true) }

    /// How far past the time the segments a player needs may start: a track's last frames before a segment
    /// boundary can sit in the next segment (the audio of the fixtures lags their video's key frames by 60 ms;
    /// ffmpeg's MPEG-TS muxer lets a stream lag up to 0.7 s).
    public static let interleaveMargin = 0.75

    /// What a player fetches to play the first `seconds`: the segments that start before then plus
    /// `interleaveMargin` (at least the first), each key and map before the first of them that needs it, each
    /// URI once, in fetch order.
    public func startURIs(seconds: Double) -> [URL] {
      var count = 0
      var start = 0.0
      while count < segments.count, count == 0 || start < seconds + Self.interleaveMargin {
        start += segmentDurations.indices.contains(count) ? segmentDurations[count] : 0
        count += 1
      }
      return uris(segments: count, trailing: false)
    }

    /// The first `count` segments with the keys and maps they need; `trailing`: also those listed after them.
    private func uris(segments count: Int, trailing: Bool) -> [URL] {
      var seen = Set<String>()
      var result: [URL] = []
      var pending = prerequisites[...]
      func add(_ url: URL) { if seen.insert(HLSPlaylist.resource(url)).inserted { result.append(url) } }
      for (index, segment) in segments.prefix(count).enumerated() {
        while let next = pending.first, next.beforeSegment <= index {
          add(next.uri)
          pending = pending.dropFirst()
        }
        add(segment)
      }
      if trailing { for rest in pending { add(rest.uri) } }
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

  static func parseMaster(_ lines: [(number: Int, kind: LineKind)], playlistURL: URL)
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
      var uri: URL?
      var isDefault: Bool
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
          // One without a URI (its media in the variant's segments) is kept too: it may be the default.
          let resolved = try list.value("URI").flatMap { uri throws(HLSError) in
            try resolve(uri, against: playlistURL, line: number)
          }
          renditions.append(
            Rendition(type: type, group: group, uri: resolved, isDefault: list.value("DEFAULT") == "YES"))
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
    // A group's `DEFAULT=YES` rendition first (what a player plays without a choice), the rest in order.
    let ordered = renditions.filter(\.isDefault) + renditions.filter { !$0.isDefault }
    return variants.map { entry in
      var variant = entry.variant
      let audio = ordered.filter { $0.type == "AUDIO" && $0.group == entry.audio }
      variant.audioRenditions = audio.compactMap(\.uri)
      variant.subtitleRenditions = ordered.filter { $0.type == "SUBTITLES" && $0.group == entry.subtitles }
        .compactMap(\.uri)
      variant.defaultAudio = audio.first?.isDefault == true ? audio.first?.uri : variant.audioRenditions.first
      return variant
    }
  }

  /// What a URI names, for telling URIs apart: two that differ only where RFC 3986 says they are the same (the
  /// scheme's case, dot segments) name one resource, which the proxy serves as one object (its path form), and
  /// which `fetch --hls` fetches once.
  static func resource(_ url: URL) -> String {
    ProxyPathForm.path(for: url.absoluteString) ?? url.absoluteString
  }

  static func parseMedia(_ lines: [(number: Int, kind: LineKind)], playlistURL: URL)
    throws(HLSError) -> MediaPlaylist
  {
    let source = playlistURL.absoluteString
    var playlist = MediaPlaylist(
      segments: [], keys: [], maps: [], targetDuration: nil, isEndList: false, prerequisites: [])
    /// The duration of the next segment (its `EXTINF`).
    var nextDuration = 0.0
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
          nextDuration = seconds
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
        playlist.segmentDurations.append(nextDuration)
        nextDuration = 0
      }
    }
    return playlist
  }
}
