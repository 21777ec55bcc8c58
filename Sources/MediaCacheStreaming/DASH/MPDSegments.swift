import Foundation

/// The segments of a DASH MPD (ISO/IEC 23009-1): its periods, adaptation sets and representations, and for a
/// representation every initialization, index and media segment URL, as `fetch --dash` needs them.
///
/// Addressing: `SegmentTemplate` with `$Number$` (from `duration`, `timescale`, `startNumber` and the
/// period's duration, capped by `endNumber`) or with a `SegmentTimeline` (`S@t`, `@d`, `@r`, `r="-1"`
/// repeating up to the next `S@t` or the end of the period) and `$Time$`; the identifiers
/// `$RepresentationID$`, `$Bandwidth$`, `$$`, and widths like `$Number%05d$`; `SegmentList`
/// (`SegmentURL@media`, `@mediaRange`, `Initialization`); `SegmentBase` (the representation's one file, with
/// `Initialization@range` and `indexRange`), and a representation with none of them (its BaseURL is the one
/// media segment). `SegmentTemplate`, `SegmentList` and `SegmentBase` are inherited from the Period and
/// AdaptationSet, the lower level's attributes and child elements overriding the higher's; the most specific
/// level that has one of the three decides which.
///
/// URLs: each level's first `BaseURL` is resolved against its parent's (MPD → Period → AdaptationSet →
/// Representation, the MPD's own URL at the top), then every segment URL against the representation's, by
/// RFC 3986.
///
/// Bounded: `parse` refuses more than `maxManifestBytes`, and `Representation.segments(limit:)` throws
/// `MPDError.tooManySegments` before it would list more than `limit` segments, however large the MPD's
/// repeat counts or durations.
public enum MPDSegments {
  /// The largest MPD accepted (8 MiB, as for HLS playlists); callers stop reading a body past this.
  public static let maxManifestBytes = 8 << 20
  /// The default cap on the segments of one enumeration.
  public static let defaultSegmentLimit = 100_000

  /// A parsed MPD.
  public struct Presentation: Sendable {
    /// The URL the MPD was read from (the base of its relative references).
    public var url: URL
    /// `type="dynamic"`: a live presentation.
    public var isDynamic: Bool
    /// `mediaPresentationDuration` in seconds.
    public var duration: Double?
    /// The periods, in document order.
    public var periods: [Period]
  }

  /// A period and its adaptation sets.
  public struct Period: Sendable {
    /// The `Period@id`, if any.
    public var id: String?
    /// 0-based position in the MPD.
    public var index: Int
    /// Start in seconds from the presentation's start.
    public var start: Double
    /// Duration in seconds, when the MPD says or implies it.
    public var duration: Double?
    /// The adaptation sets of the period, in document order.
    public var adaptationSets: [AdaptationSet]
  }

  /// An adaptation set: alternative representations of one content component.
  public struct AdaptationSet: Sendable {
    /// The `AdaptationSet@id`, if any.
    public var id: String?
    /// 0-based position in its period.
    public var index: Int
    /// `contentType`, else the first part of the `mimeType` of the set or of its first representation.
    public var contentType: String?
    /// The representations of the set, in document order.
    public var representations: [Representation]
  }

  /// One representation, with the addressing and BaseURL it inherits already applied.
  public struct Representation: Sendable {
    /// The `Representation@id` (what `mediacache fetch --dash --representation` names).
    public var id: String
    /// The `@bandwidth`, bits per second, if given.
    public var bandwidth: Int64?
    /// The `@mimeType`, from the representation or its adaptation set.
    public var mimeType: String?
    /// The `@codecs`, from the representation or its adaptation set.
    public var codecs: String?
    /// The `@width` in pixels, for video.
    public var width: Int?
    /// The `@height` in pixels, for video.
    public var height: Int?
    /// The resolved BaseURL chain: segment references resolve against it.
    public var baseURL: URL
    /// Where it is in the MPD, for messages: `Period 0 > AdaptationSet 1 > Representation 'a1'`.
    public var location: String
    var addressing: Addressing
    var periodDuration: Double?
    var mpdURL: String

    /// Every segment of the representation in playback order: the initialization segment first (if any),
    /// then the index segment (template `index`), then the media segments.
    ///
    /// - Throws: `MPDError.tooManySegments` past `limit` segments, `.invalid` for a template,
    ///   duration or range that cannot be used, `.unsupported` for `$SubNumber$`.
    public func segments(limit: Int = MPDSegments.defaultSegmentLimit) throws(MPDError) -> [Segment] {
      try MPDSegments.enumerate(self, limit: limit)
    }
  }

  /// One segment to fetch.
  public struct Segment: Sendable, Hashable {
    /// What a segment is to a player: the initialization segment, the segment index (`SegmentBase@indexRange`),
    /// or media.
    public enum Kind: Sendable, Hashable { case initialization, index, media }
    /// What the segment is.
    public var kind: Kind
    /// Its absolute URL, resolved against the `BaseURL`s in scope.
    public var url: URL
    /// The bytes of `url` the segment is, when it is not the whole file (`mediaRange`,
    /// `Initialization@range`, `indexRange`).
    public var byteRange: ClosedRange<Int64>?
    /// When a media segment starts, in seconds from the start of its period, where the addressing says it
    /// (`SegmentTemplate` with a duration or a `SegmentTimeline`).
    public var start: Double? = nil
  }

  /// How a representation's segments are addressed (one of the three, merged over the levels).
  enum Addressing: Sendable {
    case template(Template)
    case list(SegmentListInfo)
    case base(SegmentBaseInfo)
  }

  struct Template: Sendable {
    var media: String?
    var initialization: String?
    var index: String?
    var startNumber: Int64 = 1
    var endNumber: Int64?
    var timescale: Int64 = 1
    var duration: Int64?
    var presentationTimeOffset: Int64 = 0
    var timeline: [TimelineEntry]?
  }

  struct TimelineEntry: Sendable {
    var t: Int64?
    var d: Int64
    var r: Int64
  }

  struct SegmentListInfo: Sendable {
    var initialization: (url: String?, range: ClosedRange<Int64>?)?
    var media: [(url: String?, range: ClosedRange<Int64>?)]
  }

  struct SegmentBaseInfo: Sendable {
    var initialization: (url: String?, range: ClosedRange<Int64>?)?
    var indexRange: ClosedRange<Int64>?
  }

  // MARK: Parsing

  /// Parses an MPD read from `url`.
  ///
  /// - Throws: `MPDError.tooLarge` above `maxManifestBytes`, `.notUTF8`, `.documentType` for a `<!DOCTYPE`,
  ///   `.processingInstruction`, `.malformed`, `.notAnMPD` when the root is not `<MPD>`, `.invalid` for a value that cannot be used
  ///   (durations, numbers, ranges, missing `Representation@id`, a BaseURL that does not resolve),
  ///   `.unsupported` for remote (`xlink:href`) periods and adaptation sets (those that resolve to zero are
  ///   removed, as the DASH specification says).
  public static func parse(_ data: Data, url: URL) throws(MPDError) -> Presentation {
    let source = url.absoluteString
    try MPDInputCheck.screen(data, url: source, limit: maxManifestBytes)
    let root = try parseXML(data, url: source)
    guard root.name == "MPD" else { throw .notAnMPD(url: source, root: root.name) }
    var reader = AttributeReader(url: source, at: "MPD")
    let isDynamic = root["type"] == "dynamic"
    let total = try reader.duration(root, "mediaPresentationDuration")
    let mpdBase = try resolveBase(of: root, against: url, reader: reader)

    let periodElements = root.children("Period").filter { !resolvesToZero($0) }
    var periods: [Period] = []
    var previousEnd: Double? = 0
    for (index, element) in periodElements.enumerated() {
      reader.at = "Period \(index)" + (element["id"].map { " (id '\($0)')" } ?? "")
      if element["xlink:href"] != nil {
        throw .unsupported(url: source, at: reader.at, feature: "a remote Period (xlink:href)")
      }
      guard let start = try reader.duration(element, "start") ?? previousEnd else {
        throw .invalid(
          url: source, at: reader.at, reason: "no start, and the previous period has no duration")
      }
      var duration = try reader.duration(element, "duration")
      if duration == nil {
        if index + 1 < periodElements.count {
          var next = reader
          next.at = "Period \(index + 1)"
          duration = try next.duration(periodElements[index + 1], "start").map { $0 - start }
        } else if let total {
          duration = total - start
        }
      }
      if let duration, duration < 0 {
        throw .invalid(url: source, at: reader.at, reason: "the period ends before it starts")
      }
      previousEnd = duration.map { start + $0 }
      let base = try resolveBase(of: element, against: mpdBase, reader: reader)
      let sets = try adaptationSets(
        of: element, period: reader.at, base: base, duration: duration, url: source)
      periods.append(
        Period(id: element["id"], index: index, start: start, duration: duration, adaptationSets: sets))
    }
    return Presentation(url: url, isDynamic: isDynamic, duration: total, periods: periods)
  }

  /// Whether `element` is to be removed: its `xlink:href` is `urn:mpeg:dash:resolve-to-zero:2013` (ISO/IEC
  /// 23009-1 5.5.3: the element resolves to nothing; an ad break a packager left out, say), which is no remote
  /// element.
  static func resolvesToZero(_ element: Element) -> Bool {
    element["xlink:href"]?.trimmingCharacters(in: .whitespaces) == "urn:mpeg:dash:resolve-to-zero:2013"
  }

  private static func adaptationSets(
    of period: Element, period location: String, base: URL, duration: Double?, url source: String
  ) throws(MPDError) -> [AdaptationSet] {
    var sets: [AdaptationSet] = []
    for (index, set) in period.children("AdaptationSet").filter({ !resolvesToZero($0) }).enumerated() {
      let setLocation = "\(location) > AdaptationSet \(index)"
      var reader = AttributeReader(url: source, at: setLocation)
      if set["xlink:href"] != nil {
        throw .unsupported(url: source, at: setLocation, feature: "a remote AdaptationSet (xlink:href)")
      }
      let setBase = try resolveBase(of: set, against: base, reader: reader)
      var representations: [Representation] = []
      for element in set.children("Representation") {
        guard let id = element["id"], !id.isEmpty else {
          throw .invalid(url: source, at: setLocation, reason: "a Representation has no id")
        }
        reader.at = "\(setLocation) > Representation '\(id)'"
        let repBase = try resolveBase(of: element, against: setBase, reader: reader)
        let levels = [period, set, element]
        representations.append(
          Representation(
            id: id, bandwidth: try reader.integer(element, "bandwidth"),
            mimeType: element["mimeType"] ?? set["mimeType"], codecs: element["codecs"] ?? set["codecs"],
            width: try reader.integer(element, "width").map { Int(clamping: $0) },
            height: try reader.integer(element, "height").map { Int(clamping: $0) },
            baseURL: repBase, location: reader.at, addressing: try addressing(levels, reader: reader),
            periodDuration: duration, mpdURL: source))
      }
      let mime = set["mimeType"] ?? representations.first?.mimeType
      let type = set["contentType"] ?? mime.flatMap { $0.split(separator: "/").first.map(String.init) }
      sets.append(
        AdaptationSet(id: set["id"], index: index, contentType: type, representations: representations))
    }
    return sets
  }

  /// The element's first `BaseURL` resolved against `parent`, or `parent` without one.
  private static func resolveBase(of element: Element, against parent: URL, reader: AttributeReader)
    throws(MPDError) -> URL
  {
    guard let reference = element.child("BaseURL")?.text, !reference.isEmpty else { return parent }
    return try reader.resolve(reference, against: parent, what: "BaseURL")
  }

  /// The addressing of a representation from `levels` (Period, AdaptationSet, Representation).
  private static func addressing(_ levels: [Element], reader: AttributeReader) throws(MPDError)
    -> Addressing
  {
    let kinds = ["SegmentTemplate", "SegmentList", "SegmentBase"]
    // The most specific level with any of the three decides the kind.
    let kind = levels.reversed().lazy.compactMap { level in kinds.first { level.child($0) != nil } }.first
    let elements = levels.compactMap { $0.child(kind ?? "SegmentBase") }
    let merged = MergedElement(levels: elements)
    switch kind {
    case "SegmentTemplate":
      var template = Template()
      template.media = merged["media"]
      template.initialization = merged["initialization"] ?? merged.child("Initialization")?["sourceURL"]
      template.index = merged["index"] ?? merged.child("RepresentationIndex")?["sourceURL"]
      try readMultipleSegmentBase(merged, reader: reader, into: &template)
      return .template(template)
    case "SegmentList":
      let list = merged.children("SegmentURL").map { ($0["media"], $0["mediaRange"]) }
      var media: [(url: String?, range: ClosedRange<Int64>?)] = []
      for (url, range) in list { media.append((url, try reader.range(range, "SegmentURL@mediaRange"))) }
      return .list(SegmentListInfo(initialization: try initialization(merged, reader: reader), media: media))
    default:
      return .base(
        SegmentBaseInfo(
          initialization: try initialization(merged, reader: reader),
          indexRange: try reader.range(merged["indexRange"], "SegmentBase@indexRange")))
    }
  }

  private static func initialization(_ merged: MergedElement, reader: AttributeReader) throws(MPDError)
    -> (url: String?, range: ClosedRange<Int64>?)?
  {
    guard let element = merged.child("Initialization") else { return nil }
    return (element["sourceURL"], try reader.range(element["range"], "Initialization@range"))
  }

  private static func readMultipleSegmentBase(
    _ merged: MergedElement, reader: AttributeReader, into template: inout Template
  ) throws(MPDError) {
    let element = "SegmentTemplate"
    template.startNumber = try reader.integer(merged["startNumber"], "\(element)@startNumber") ?? 1
    template.endNumber = try reader.integer(merged["endNumber"], "\(element)@endNumber")
    template.timescale = try reader.integer(merged["timescale"], "\(element)@timescale") ?? 1
    guard template.timescale > 0 else {
      throw .invalid(url: reader.url, at: reader.at, reason: "\(element)@timescale must be positive")
    }
    template.duration = try reader.integer(merged["duration"], "\(element)@duration")
    template.presentationTimeOffset =
      try reader.integer(merged["presentationTimeOffset"], "\(element)@presentationTimeOffset") ?? 0
    if let timeline = merged.child("SegmentTimeline") {
      var entries: [TimelineEntry] = []
      for s in timeline.children("S") {
        let t = try reader.integer(s["t"], "S@t")
        guard let d = try reader.integer(s["d"], "S@d") else {
          throw .invalid(
            url: reader.url, at: reader.at, reason: "an S element of the SegmentTimeline has no d")
        }
        entries.append(
          TimelineEntry(t: t, d: d, r: try reader.integer(s["r"], "S@r", allowNegative: true) ?? 0))
      }
      template.timeline = entries
    }
  }

  /// Attributes of one kind of element over the levels, the most specific level's winning; a child element
  /// (`SegmentTimeline`, `Initialization`, the `SegmentURL`s) comes whole from the most specific level having
  /// it.
  struct MergedElement {
    var levels: [Element]
    subscript(_ attribute: String) -> String? { levels.reversed().lazy.compactMap { $0[attribute] }.first }
    func child(_ name: String) -> Element? { levels.reversed().lazy.compactMap { $0.child(name) }.first }
    func children(_ name: String) -> [Element] {
      levels.reversed().lazy.map { $0.children(name) }.first { !$0.isEmpty } ?? []
    }
  }
}
