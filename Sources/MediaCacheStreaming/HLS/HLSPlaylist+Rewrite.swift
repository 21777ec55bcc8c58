import Foundation

extension HLSPlaylist {
  // MARK: Rewriting

  /// The playlist with every URI replaced by `transform(absoluteURL)`, everything else byte for byte as it was.
  ///
  /// Replaced are the URI lines (lines that are not blank and do not start with `#`; whitespace around the URI
  /// is kept) and the quoted URI attribute of the tags in `uriAttributes`. Each URI is resolved against
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
  ///   `.malformedLine` for a URI-bearing tag whose attribute list, naming one of its URI attributes, cannot be
  ///   parsed, `.unresolvableURI` for a
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
        // A line that names none of its tag's URI attributes is not parsed (kept as written): an
        // `EXT-X-DATERANGE` of a live stream's ad markers, with no asset, cannot fail the playlist.
        guard let names = uriAttributes[String(name)], let attributes,
          names.contains(where: { attributes.contains($0) })
        else {
          replaced = nil
          break
        }
        let list = try attributeList(attributes, line: line.number, url: source)
        guard let uri = list.first(where: { names.contains(String($0.name)) }) else {
          replaced = nil
          break
        }
        guard uri.isQuoted else {
          throw .malformedLine(url: source, line: line.number, reason: "\(uri.name) is not a quoted string")
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
  static func replacement(
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
  static func replacementProblem(_ replacement: String) -> String? {
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
}
