import Foundation
import Logging
import Synchronization

/// swift-log handler writing one logfmt line per event to standard error: `time`, `level`, `logger`, `msg`,
/// then the metadata in key order (`key=value`, a value with a space, `=` or `"` quoted). The proxy's access
/// lines come through it (`AccessLog`).
struct LogfmtHandler: LogHandler {
  let label: String
  var logLevel: Logger.Level
  var metadata: Logger.Metadata = [:]
  var metadataProvider: Logger.MetadataProvider?

  /// One write at a time, so lines from several threads never interleave.
  private static let output = Mutex(())

  init(label: String, level: Logger.Level) {
    self.label = label
    self.logLevel = level
  }

  subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  func log(event: LogEvent) {
    var all = metadata
    if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
    if let extra = event.metadata { all.merge(extra) { $1 } }
    var line = "time=\(Self.timestamp()) level=\(event.level.rawValue) logger=\(Self.quoted(label))"
    line += " msg=\(Self.quoted(event.message.description))"
    for key in all.keys.sorted() { line += " \(key)=\(Self.quoted("\(all[key]!)"))" }
    line += "\n"
    Self.output.withLock { _ in FileHandle.standardError.write(Data(line.utf8)) }
  }

  /// `text` as a logfmt value: bare when it has no space, `=`, `"` or control character, else a quoted string
  /// escaped as JSON escapes it (Foundation's encoder).
  static func quoted(_ text: String) -> String {
    let needsQuotes =
      text.isEmpty || text.unicodeScalars.contains { $0 == " " || $0 == "=" || $0 == "\"" || $0.value < 0x20 }
    guard needsQuotes else { return text }
    let encoder = JSONEncoder()
    encoder.outputFormatting = .withoutEscapingSlashes
    return (try? encoder.encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
  }

  /// Now in UTC, ISO 8601 with milliseconds.
  static func timestamp() -> String {
    Date().formatted(
      .iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
  }
}

/// `--log-level`: swift-log's levels by name.
extension Logger.Level {
  /// The level named `text` (trace, debug, info, notice, warning, error, critical).
  init?(named text: String) { self.init(rawValue: text.lowercased()) }
}
