import Foundation

extension MPDSegments {
  /// Reads typed attribute values, throwing `MPDError.invalid` that names the MPD, the place and the
  /// value.
  struct AttributeReader {
    var url: String
    var at: String

    func invalid(_ reason: String) -> MPDError { .invalid(url: url, at: at, reason: reason) }

    func duration(_ element: Element, _ name: String) throws(MPDError) -> Double? {
      guard let text = element[name] else { return nil }
      guard let seconds = MPDSegments.duration(text), seconds >= 0 else {
        throw invalid("\(element.name)@\(name) '\(text.prefix(80))' is not an xs:duration")
      }
      return seconds
    }

    func integer(_ element: Element, _ name: String) throws(MPDError) -> Int64? {
      try integer(element[name], "\(element.name)@\(name)")
    }

    /// A non-negative integer (or, with `allowNegative`, any), nil when absent.
    func integer(_ text: String?, _ what: String, allowNegative: Bool = false) throws(MPDError)
      -> Int64?
    {
      guard let text else { return nil }
      guard let value = Int64(text.trimmingCharacters(in: .whitespaces)), allowNegative || value >= 0 else {
        throw invalid("\(what) '\(text.prefix(80))' is not a\(allowNegative ? "n" : " non-negative") integer")
      }
      return value
    }

    func range(_ text: String?, _ what: String) throws(MPDError) -> ClosedRange<Int64>? {
      guard let text else { return nil }
      guard let range = MPDSegments.byteRange(text) else {
        throw invalid("\(what) '\(text.prefix(80))' is not a byte range first-last")
      }
      return range
    }

    /// `reference` resolved against `base` (RFC 3986); an http(s) result must have a host.
    func resolve(_ reference: String, against base: URL, what: String) throws(MPDError) -> URL {
      let trimmed = reference.trimmingCharacters(in: .whitespacesAndNewlines)
      guard let url = URL(string: trimmed, relativeTo: base)?.absoluteURL,
        let scheme = url.scheme?.lowercased(),
        !["http", "https"].contains(scheme) || !(url.host ?? "").isEmpty
      else {
        throw invalid("\(what) '\(reference.prefix(200))' cannot be resolved against \(base.absoluteString)")
      }
      return url
    }
  }

  /// Collects segments, refusing to pass the limit.
  private struct Collector {
    let representation: Representation
    let limit: Int
    var reader: AttributeReader
    var segments: [Segment] = []

    init(_ representation: Representation, limit: Int) {
      self.representation = representation
      self.limit = limit
      reader = AttributeReader(url: representation.mpdURL, at: representation.location)
    }

    /// Throws unless `count` more segments fit under the limit.
    func reserve(_ count: Int64) throws(MPDError) {
      guard count <= Int64(limit - segments.count) else {
        throw .tooManySegments(url: reader.url, at: reader.at, limit: limit)
      }
    }

    mutating func append(
      _ kind: Segment.Kind, _ reference: String?, range: ClosedRange<Int64>?, what: String,
      start: Double? = nil
    ) throws(MPDError) {
      try reserve(1)
      let base = representation.baseURL
      let url = try reference.map { (reference) throws(MPDError) in
        try reader.resolve(reference, against: base, what: what)
      }
      segments.append(Segment(kind: kind, url: url ?? base, byteRange: range, start: start))
    }
  }

  static func enumerate(_ representation: Representation, limit: Int) throws(MPDError) -> [Segment] {
    var collector = Collector(representation, limit: limit)
    switch representation.addressing {
    case .template(let template):
      try enumerate(template, into: &collector)
    case .list(let list):
      if let initialization = list.initialization {
        try collector.append(
          .initialization, initialization.url, range: initialization.range, what: "Initialization@sourceURL")
      }
      for media in list.media {
        try collector.append(.media, media.url, range: media.range, what: "SegmentURL@media")
      }
    case .base(let base):
      if let initialization = base.initialization, initialization.url != nil || initialization.range != nil {
        try collector.append(
          .initialization, initialization.url, range: initialization.range, what: "Initialization@sourceURL")
      }
      if let index = base.indexRange { try collector.append(.index, nil, range: index, what: "BaseURL") }
      // The file itself is the one media segment (its ranges are read from the index by a player).
      try collector.append(.media, nil, range: nil, what: "BaseURL")
    }
    return collector.segments
  }

  private static func enumerate(_ template: Template, into collector: inout Collector) throws(MPDError) {
    let reader = collector.reader
    let representation = collector.representation
    func expand(_ pattern: String, _ attribute: String, number: Int64?, time: Int64?) throws(MPDError)
      -> String
    {
      try expandTemplate(
        pattern, representationID: representation.id, bandwidth: representation.bandwidth, number: number,
        time: time, what: "SegmentTemplate@\(attribute)", reader: reader)
    }
    if let initialization = template.initialization {
      let reference = try expand(initialization, "initialization", number: nil, time: nil)
      try collector.append(.initialization, reference, range: nil, what: "SegmentTemplate@initialization")
    }
    if let index = template.index {
      try collector.append(
        .index, try expand(index, "index", number: nil, time: nil), range: nil, what: "SegmentTemplate@index")
    }
    guard let media = template.media else {
      throw reader.invalid("SegmentTemplate has no media attribute")
    }
    let scale = Double(template.timescale)
    /// The end of the period on the template's timeline, if the period's duration is known.
    let periodEnd: Int64? = try representation.periodDuration.map { (seconds) throws(MPDError) in
      let end = seconds * scale + Double(template.presentationTimeOffset)
      guard end.isFinite, end < 9e18 else { throw reader.invalid("the period is too long for the timescale") }
      return Int64(end.rounded())
    }
    var number = template.startNumber
    if let timeline = template.timeline {
      var time: Int64 = 0
      for (index, entry) in timeline.enumerated() {
        guard entry.d > 0 else { throw reader.invalid("S@d must be positive, not \(entry.d)") }
        if let t = entry.t { time = t }
        var count: Int64
        if entry.r >= 0 {
          count = entry.r == Int64.max ? entry.r : entry.r + 1
        } else if entry.r == -1 {
          let nextStart = index + 1 < timeline.count ? timeline[index + 1].t : nil
          guard let end = nextStart ?? periodEnd else {
            throw reader.invalid(
              "S@r=-1 repeats to the end of a period whose duration is unknown (no Period@duration, next "
                + "Period@start or MPD@mediaPresentationDuration)")
          }
          count = end > time ? (end - time + entry.d - 1) / entry.d : 0
        } else {
          throw reader.invalid("S@r must be -1 or more, not \(entry.r)")
        }
        try collector.reserve(count)
        for _ in 0..<count {
          let reference = try expand(media, "media", number: number, time: time)
          let start = (Double(time) - Double(template.presentationTimeOffset)) / scale
          try collector.append(.media, reference, range: nil, what: "SegmentTemplate@media", start: start)
          let (nextTime, overflow) = time.addingReportingOverflow(entry.d)
          guard !overflow else { throw reader.invalid("the SegmentTimeline's times overflow") }
          time = nextTime
          number += 1
        }
      }
      return
    }
    guard let duration = template.duration, duration > 0 else {
      throw reader.invalid("SegmentTemplate has neither a SegmentTimeline nor a positive duration")
    }
    var count: Int64
    if let periodDuration = representation.periodDuration {
      // Decimal durations such as PT3.9999999S or 0.1 s steps land a hair above a whole count.
      let exact = periodDuration * scale / Double(duration)
      guard exact.isFinite, exact < Double(Int64.max / 2) else {
        throw .tooManySegments(url: reader.url, at: reader.at, limit: collector.limit)
      }
      count = Int64((exact - 1e-9).rounded(.up))
    } else if let endNumber = template.endNumber {
      count = endNumber - template.startNumber + 1
    } else {
      throw reader.invalid(
        "the number of segments is unknown: the period has no duration (Period@duration, next Period@start or "
          + "MPD@mediaPresentationDuration) and SegmentTemplate no endNumber")
    }
    if let endNumber = template.endNumber { count = min(count, endNumber - template.startNumber + 1) }
    count = max(count, 0)
    try collector.reserve(count)
    for index in 0..<count {
      let time = template.presentationTimeOffset + index * duration
      let reference = try expand(media, "media", number: number, time: time)
      let start = Double(index * duration) / scale
      try collector.append(.media, reference, range: nil, what: "SegmentTemplate@media", start: start)
      number += 1
    }
  }

  /// Longest width a `%0<width>d` format tag may ask for.
  static let maxTemplateWidth = 32

  /// A SegmentTemplate string with its identifiers replaced: `$RepresentationID$`, `$Number$`, `$Time$`,
  /// `$Bandwidth$` (the last three with an optional `%0<width>d` format tag) and `$$`.
  ///
  /// - Throws: `MPDError.invalid` for an unterminated `$`, an unknown identifier, a format tag on
  ///   `$RepresentationID$` or other than `%0<width>d`, or an identifier with no value here (`$Number$` in an
  ///   initialization template, `$Bandwidth$` without `@bandwidth`); `.unsupported` for `$SubNumber$`.
  static func expandTemplate(
    _ template: String, representationID: String, bandwidth: Int64?, number: Int64?, time: Int64?,
    what: String,
    reader: AttributeReader
  ) throws(MPDError) -> String {
    func bad(_ reason: String) -> MPDError {
      reader.invalid("\(what) '\(template.prefix(200))': \(reason)")
    }
    var output = ""
    var rest = Substring(template)
    while let dollar = rest.firstIndex(of: "$") {
      output += rest[..<dollar]
      let afterDollar = rest.index(after: dollar)
      guard let close = rest[afterDollar...].firstIndex(of: "$") else { throw bad("a '$' is not closed") }
      let identifier = rest[afterDollar..<close]
      rest = rest[rest.index(after: close)...]
      if identifier.isEmpty {
        output += "$"
        continue
      }
      let (name, format) = identifier.splitOnce(at: "%")
      let value: Int64?
      switch name {
      case "RepresentationID":
        guard format == nil else { throw bad("$RepresentationID$ takes no format tag") }
        output += representationID
        continue
      case "Number": value = number
      case "Time": value = time
      case "Bandwidth": value = bandwidth
      case "SubNumber":
        throw .unsupported(url: reader.url, at: reader.at, feature: "$SubNumber$ in \(what)")
      default: throw bad("unknown identifier $\(identifier.prefix(40))$")
      }
      guard let value else { throw bad("$\(name)$ has no value here") }
      var digits = String(value)
      if let format {
        // %0<width>d: zero-padded to width (ISO/IEC 23009-1 5.3.9.4.4); %d alone is accepted too.
        guard format.hasSuffix("d"), format.dropLast().allSatisfy(\.isNumber),
          format.count == 1 || format.first == "0",
          let width = format.count == 1 ? 0 : Int(format.dropLast()), width <= maxTemplateWidth
        else {
          throw bad("format tag '%\(format.prefix(40))' is not %0<width>d (width up to \(maxTemplateWidth))")
        }
        if digits.count < width { digits = String(repeating: "0", count: width - digits.count) + digits }
      }
      output += digits
    }
    output += rest
    return output
  }
}
