import ArgumentParser
import MediaCache
import MediaCacheStreaming

/// `--keep-heads WINDOW` of `proxy` and `purge`: what a size limit keeps of idle objects before it evicts whole
/// ones (`HeadWindowArgument`: `5s`, a size, or `off`).
struct KeepHeadsArgument: CustomStringConvertible {
  /// The window; nil evicts whole objects only.
  var window: HeadWindow?
  /// The argument as given.
  var description: String

  /// The default: 5 seconds of media, the Preloader's target for the next item.
  static let mediaStart = KeepHeadsArgument(window: .defaultMediaStart, description: "5s")

  /// The help line both commands show.
  static let help = ArgumentHelp(
    "Before evicting whole objects to meet --max-size, cut idle ones down to what a player reads to start "
      + "them: 5s keeps an MP4's moov and first 5 seconds (anything else: its first 5 s at 4 Mbit/s); a size "
      + "keeps the first bytes; off evicts whole objects only (default 5s).", valueName: "WINDOW")

  /// Parses `text` for `@Option(transform:)`.
  static func parse(_ text: String) throws -> KeepHeadsArgument {
    do {
      return KeepHeadsArgument(window: try HeadWindowArgument.parse(text), description: text)
    } catch {
      throw ValidationError(error.description)
    }
  }
}
