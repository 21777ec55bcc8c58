// libFuzzer target for the HLS playlist code of the proxy (`HLSPlaylist.rewrite`, `.parse`, `.isPlaylist`).
// Built and run by `tools/fuzz/run hls`; see tools/fuzz/README.md.
//
// The input is a playlist body. It is decoded as the proxy decodes it (`String(data:encoding: .utf8)`; a body
// that is not UTF-8 is served untouched, so only `isPlaylist` sees it) and rewritten with the proxy's own
// transform (`ProxiedURL.path(for:)`, what `ProxyServer.proxyPath` is) against a fixed origin URL. If the
// rewrite succeeds:
//   1. the output has the same lines with the same endings; a line that holds no URI is unchanged byte for
//      byte; a URI line, or the quoted URI attribute of a tag in `HLSPlaylist.uriAttributes`, is either
//      unchanged (its target, resolved against the origin playlist, is not http or https) or has exactly that
//      URI replaced, everything around it kept;
//   2. every replacement, resolved against the proxied playlist's URL as a player would, is a request to the
//      proxy whose `url` parameter (decoded by `ProxiedURL.originURL(inRequestTarget:)`, as the proxy
//      decodes it) is the target's absolute URL, which the proxy's origin check accepts; no URI in the output
//      that resolves to http or https points anywhere but the proxy;
//   3. the output holds as many URIs as the input, and its size is bounded: each replacement is at most
//      `proxyPrefix + 3 * (origin + 3 * uri)` bytes, plus a little;
//   4. `parse` agrees before and after: the input parses iff the output parses (failing with the same case on
//      the same line), to the same kind of playlist with the same number of variants, renditions, segments,
//      keys and maps, the same durations and end flag, each URL of the output being the proxied form of the
//      input's URL at the same place (or the same URL when it is not http or https); `allURIs` maps the same.
// A parse that succeeds must list each URI once in `allURIs` (keys and maps before the segments that need
// them, all http or https). `rewrite` must never report `.invalidReplacement` for the proxy's transform, and
// every error must be describable. `isPlaylist` must say yes to every body that starts with `#EXTM3U` (after a
// byte order mark) under a `.m3u8` URL, and no to the rest.
// A violated property ends in `fatalError`, which libFuzzer reports as a crash and saves the input.

import Foundation
import MediaCacheStreaming

/// Where the fuzzed playlist comes from: https, a port, a directory, a query (relative URIs lose it).
let originURL = URL(string: "https://Origin.example:8443/live/v1/master.m3u8?token=a%20b&x=1")!
/// The proxied playlist's URL, against which the player resolves the rewritten URIs.
let proxyHost = "127.0.0.1"
let proxyPort = 8080
let proxiedPlaylistURL = URL(
  string: "http://\(proxyHost):\(proxyPort)" + ProxiedURL.path(for: originURL.absoluteString))!

/// libFuzzer's entry point: runs one input (`size` bytes at `data`) and returns 0; a violated property traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  defer { Memo.clear() }
  let body = Data(bytes: data, count: size)
  checkRecognition(body)
  guard let text = String(data: body, encoding: .utf8) else { return 0 }
  let output: String
  do {
    output = try HLSPlaylist.rewrite(text, playlistURL: originURL) { target in
      ProxiedURL.path(for: target.absoluteString)
    }
  } catch {
    _ = error.description
    if error.code == .invalidReplacement {
      fatalError("the proxy's own transform produced an invalid replacement: \(error)")
    }
    return 0
  }
  checkRewrite(text, output)
  checkParse(text, output)
  checkPathFormRewrite(text)
  return 0
}

/// Whether two absolute URLs name the same origin request: equal, or equal in path form without their
/// fragments (the path form removes dot segments, lowercases the scheme and writes an empty path as `/`).
func sameTarget(_ a: String, _ b: String) -> Bool {
  if a == b { return true }
  let request = { (url: String) in String(url.prefix { $0 != "#" }) }  // a player never sends the fragment
  guard let pathA = pathForm(request(a)), let pathB = pathForm(request(b))
  else {
    return false
  }
  return pathA == pathB
}

/// Property 5: rewritten for a path-form request (relative URIs that resolve through the proxy kept as
/// written), the playlist has the same lines, and every http(s) URI in it, resolved against the playlist's
/// path-form URL as a player would, is a request to the proxy for what the input's URI names at the origin.
func checkPathFormRewrite(_ text: String) {
  let output: String
  do {
    output = try HLSPlaylist.rewrite(
      text, playlistURL: originURL,
      keeping: { ProxyPathForm.keepsReference($0, base: originURL.absoluteString) }
    ) { target in ProxiedURL.path(for: target.absoluteString) }
  } catch {
    return
  }
  let inLines = lines(text)
  let outLines = lines(output)
  guard inLines.count == outLines.count else { fatalError("the path-form rewrite changed the line count") }
  for (number, (old, new)) in zip(inLines, outLines).enumerated() {
    guard let slot = uriSlot(old.content), let target = resolve(slot.uri, against: originURL), isHTTP(target)
    else { continue }
    guard let newSlot = uriSlot(new.content), let fetched = proxiedOrigin(of: newSlot.uri) else {
      fatalError("path form, line \(number + 1): \(slot.uri.debugDescription) does not reach the proxy")
    }
    guard sameTarget(fetched, target.absoluteString) else {
      fatalError(
        "path form, line \(number + 1): the proxy would fetch \(fetched), not \(target.absoluteString)")
    }
  }
}

// MARK: - Recognition

func checkRecognition(_ body: Data) {
  var bytes = body[...]
  if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
  let startsLikePlaylist = bytes.starts(with: Array("#EXTM3U".utf8))
  let prefix = body.prefix(16)
  guard
    HLSPlaylist.isPlaylist(contentType: nil, url: "https://h/a/b.m3u8?q=1", prefix: prefix)
      == startsLikePlaylist,
    HLSPlaylist.isPlaylist(contentType: "application/vnd.apple.mpegurl", url: "https://h/x", prefix: prefix),
    !HLSPlaylist.isPlaylist(contentType: "video/mp2t", url: "https://h/a.ts", prefix: prefix)
  else {
    fatalError("isPlaylist is wrong for a body starting \(Array(prefix))")
  }
}

// MARK: - Rewriting

/// One line of a playlist: its content and its ending (`\n`, `\r\n` or nothing), split independently of
/// `HLSPlaylist`.
struct Line {
  var content: Substring
  var ending: String
}

func lines(_ text: String) -> [Line] {
  var result: [Line] = []
  var rest = text[...]
  while !rest.isEmpty {
    guard let newline = rest.utf8.firstIndex(of: UInt8(ascii: "\n")) else {
      result.append(Line(content: rest, ending: ""))
      break
    }
    var content = rest[..<newline]
    var ending = "\n"
    if content.utf8.last == UInt8(ascii: "\r") {
      content = content[..<content.utf8.index(before: content.endIndex)]
      ending = "\r\n"
    }
    result.append(Line(content: content, ending: ending))
    rest = rest[rest.utf8.index(after: newline)...]
  }
  return result
}

/// Where a URI sits in a line: the URI as written (a URI line without the spaces and tabs around it, or the
/// text between the quotes of a `URI` attribute) and the text before and after it.
struct URISlot {
  var before: Substring
  var uri: Substring
  var after: Substring
}

/// The URI of a line, if it holds one: a URI line (not blank, not starting with `#` after an optional byte
/// order mark and spaces), or a tag of `HLSPlaylist.uriAttributes` with one of its URI attributes, quoted (the
/// first of those names in the list).
func uriSlot(_ content: Substring) -> URISlot? {
  var line = content
  if line.unicodeScalars.first == "\u{FEFF}" { line = line.dropFirst() }
  let scalars = line.unicodeScalars
  guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return nil }
  if scalars[first] != "#" {
    let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })!
    let end = scalars.index(after: last)
    return URISlot(before: content[..<first], uri: line[first..<end], after: line[end...])
  }
  guard line.hasPrefix("#EXT"), let colon = scalars.firstIndex(of: ":"),
    let names = HLSPlaylist.uriAttributes[String(line[..<colon])]
  else { return nil }
  guard let value = quotedURIAttribute(line[scalars.index(after: colon)...], names: names) else { return nil }
  return URISlot(before: content[..<value.startIndex], uri: value, after: content[value.endIndex...])
}

/// The text between the quotes of the first attribute named one of `names` in an attribute list (RFC 8216
/// §4.2), if it has one.
func quotedURIAttribute(_ list: Substring, names: Set<String>) -> Substring? {
  let scalars = list.unicodeScalars
  var index = scalars.startIndex
  func skipSpaces() {
    while index < scalars.endIndex, scalars[index] == " " || scalars[index] == "\t" {
      scalars.formIndex(after: &index)
    }
  }
  while true {
    skipSpaces()
    guard index < scalars.endIndex else { return nil }
    let nameStart = index
    while index < scalars.endIndex, scalars[index] != "=" { scalars.formIndex(after: &index) }
    guard index < scalars.endIndex else { return nil }
    let name = list[nameStart..<index]
    scalars.formIndex(after: &index)
    var value: Substring
    var quoted = false
    if index < scalars.endIndex, scalars[index] == "\"" {
      scalars.formIndex(after: &index)
      let start = index
      while index < scalars.endIndex, scalars[index] != "\"" { scalars.formIndex(after: &index) }
      guard index < scalars.endIndex else { return nil }
      value = list[start..<index]
      quoted = true
      scalars.formIndex(after: &index)
    } else {
      let start = index
      while index < scalars.endIndex, scalars[index] != "," { scalars.formIndex(after: &index) }
      value = list[start..<index]
    }
    if names.contains(String(name)) { return quoted ? value : nil }
    skipSpaces()
    guard index < scalars.endIndex, scalars[index] == "," else { return nil }
    scalars.formIndex(after: &index)
  }
}

/// A URI as written in a playlist resolved against the playlist's URL, as a player would (RFC 3986).
/// Remembered for the input being run (`Memo`): the checks resolve each URI several times.
func resolve(_ uri: Substring, against base: URL) -> URL? {
  remembered(&Memo.resolved, Memo.Key(text: String(uri), base: base == originURL)) {
    URL(string: trimmingWhitespace(uri), relativeTo: base)?.absoluteURL
  }
}

/// `table[key]` if it is there, else `compute()`, kept there (nil results too).
func remembered<Key: Hashable, Value>(_ table: inout [Key: Value?], _ key: Key, _ compute: () -> Value?)
  -> Value?
{
  if let known = table[key] { return known }
  let value = compute()
  table[key] = .some(value)
  return value
}

/// `text.trimmingCharacters(in: .whitespaces)`, without Foundation's round trip through UTF-16 when neither end
/// can be trimmed (an ASCII character other than space and tab: `.whitespaces` is Unicode's Zs and the tab,
/// and the only ASCII ones are space and tab). That round trip was the harness's largest cost.
func trimmingWhitespace(_ text: Substring) -> String {
  func kept(_ byte: UInt8?) -> Bool {
    guard let byte else { return false }
    return byte < 0x80 && byte != UInt8(ascii: " ") && byte != UInt8(ascii: "\t")
  }
  if kept(text.utf8.first) && kept(text.utf8.last) { return String(text) }
  return text.trimmingCharacters(in: .whitespaces)
}

/// What the checks of one input worked out, cleared after each input (all of it freed, so an input leaves
/// nothing allocated for libFuzzer's leak check to look into). `resolve`, `proxiedOrigin` and
/// `ProxyPathForm.path` are pure functions of their arguments (or trap), so remembering them changes no check.
enum Memo {
  struct Key: Hashable {
    var text: String
    /// Resolved against `originURL` (else against `proxiedPlaylistURL`).
    var base: Bool
  }
  nonisolated(unsafe) static var resolved: [Key: URL?] = [:]
  nonisolated(unsafe) static var proxied: [String: String?] = [:]
  nonisolated(unsafe) static var pathForms: [String: String?] = [:]

  static func clear() {
    resolved.removeAll()
    proxied.removeAll()
    pathForms.removeAll()
  }
}

func isHTTP(_ url: URL) -> Bool {
  let scheme = url.scheme?.lowercased()
  return scheme == "http" || scheme == "https"
}

/// The origin URL the proxy fetches when a player requests `reference` (a URI of the rewritten playlist,
/// resolved against the proxied playlist's URL); nil if the request does not go to the proxy at all, and a
/// `fatalError` if it goes to the proxy but would be refused.
func proxiedOrigin(of reference: Substring) -> String? {
  remembered(&Memo.proxied, String(reference)) { uncachedProxiedOrigin(of: reference) }
}

func uncachedProxiedOrigin(of reference: Substring) -> String? {
  guard let url = resolve(reference, against: proxiedPlaylistURL) else { return nil }
  guard isHTTP(url), url.host == proxyHost, url.port == proxyPort else { return nil }
  guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
    fatalError("the proxied URI \(reference.debugDescription) does not split into components")
  }
  // The request target the player sends, decoded the way the proxy decodes it.
  let target = components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
  guard let value = ProxiedURL.originURL(inRequestTarget: target), !value.isEmpty else {
    fatalError("the proxied URI \(reference.debugDescription) has no url parameter (request \(target))")
  }
  // The proxy's origin check (ProxyResponder.checkedOriginURL): an absolute http(s) URL with a host, and at
  // most 8 KiB (longer origin URIs are refused; that is a limit, not checked here).
  if value.utf8.count <= 8192 {
    guard let origin = URL(string: value), let scheme = origin.scheme?.lowercased(),
      scheme == "http" || scheme == "https", let host = origin.host, !host.isEmpty
    else {
      fatalError("the proxy would refuse its own rewritten URI \(reference.debugDescription): url=\(value)")
    }
  }
  return value
}

/// Properties 1 to 3 for an input and its rewrite.
func checkRewrite(_ input: String, _ output: String) {
  let inLines = lines(input)
  let outLines = lines(output)
  guard inLines.count == outLines.count else {
    fatalError("rewriting changed the number of lines: \(inLines.count) -> \(outLines.count)")
  }
  let proxyOverhead = ProxiedURL.path(for: "").utf8.count + 129  // '/', the name (<= 128), '?url='
  var inURIs = 0
  var outURIs = 0
  var bound = input.utf8.count
  for (number, (old, new)) in zip(inLines, outLines).enumerated() {
    let place = "line \(number + 1) (\(old.content.prefix(200).debugDescription))"
    guard old.ending == new.ending else { fatalError("\(place): line ending changed") }
    let newSlot = uriSlot(new.content)
    if newSlot != nil { outURIs += 1 }
    guard let slot = uriSlot(old.content) else {
      guard old.content == new.content else {
        fatalError("\(place): a line without a URI changed to \(new.content.prefix(200).debugDescription)")
      }
      continue
    }
    inURIs += 1
    guard let target = resolve(slot.uri, against: originURL) else {
      fatalError("\(place): the URI does not resolve, yet the rewrite succeeded")
    }
    guard isHTTP(target) else {
      guard old.content == new.content else {
        fatalError("\(place): a \(target.scheme ?? "scheme-less") URI was changed")
      }
      // Left as written: it must not turn into an http(s) request when resolved against the proxy.
      if let resolved = resolve(slot.uri, against: proxiedPlaylistURL), isHTTP(resolved) {
        fatalError("\(place): the URI left as written resolves to \(resolved.absoluteString) on the proxy")
      }
      continue
    }
    // Replaced: the same line around a new URI.
    let newUTF8 = new.content.utf8
    let beforeCount = slot.before.utf8.count
    let afterCount = slot.after.utf8.count
    guard newUTF8.count > beforeCount + afterCount, newUTF8.starts(with: slot.before.utf8),
      newUTF8.reversed().starts(with: slot.after.utf8.reversed())
    else {
      fatalError("\(place): the text around the URI changed: \(new.content.prefix(300).debugDescription)")
    }
    let start = newUTF8.index(new.content.startIndex, offsetBy: beforeCount)
    let end = newUTF8.index(new.content.endIndex, offsetBy: -afterCount)
    let replacement = new.content[start..<end]
    guard !replacement.hasPrefix("#"),
      !replacement.unicodeScalars.contains(where: { $0 == "\"" || $0.value < 0x20 || $0.value == 0x7F })
    else { fatalError("\(place): unsafe replacement \(replacement.debugDescription)") }
    guard let fetched = proxiedOrigin(of: replacement) else {
      fatalError("\(place): the http(s) URI was not proxied: \(replacement.prefix(300).debugDescription)")
    }
    guard sameTarget(fetched, target.absoluteString) else {
      fatalError("\(place): the proxy would fetch \(fetched), not \(target.absoluteString)")
    }
    let limit = proxyOverhead + 3 * (originURL.absoluteString.utf8.count + 3 * slot.uri.utf8.count + 8)
    guard replacement.utf8.count <= limit else {
      fatalError("\(place): a \(slot.uri.utf8.count)-byte URI became \(replacement.utf8.count) bytes")
    }
    bound += limit
  }
  guard inURIs == outURIs else { fatalError("\(inURIs) URIs in, \(outURIs) out") }
  guard output.utf8.count <= bound else {
    fatalError("output of \(output.utf8.count) bytes for \(input.utf8.count) in (bound \(bound))")
  }
  // No line of the output sends a player to an http(s) URL other than the proxy.
  for line in outLines {
    guard let slot = uriSlot(line.content),
      let resolved = resolve(slot.uri, against: proxiedPlaylistURL), isHTTP(resolved)
    else { continue }
    guard proxiedOrigin(of: slot.uri) != nil else {
      fatalError("the output sends a player to \(resolved.absoluteString), not through the proxy")
    }
  }
}

// MARK: - Parsing

/// An error's case and line, the part that must not depend on the URIs.
func shape(_ error: HLSError) -> String {
  "\(error.code)" + (error.line.map { "@\($0)" } ?? "")
}

func parsed(_ text: String, _ url: URL) -> Result<HLSPlaylist.Playlist, HLSError> {
  Result { () throws(HLSError) in try HLSPlaylist.parse(text, playlistURL: url) }
}

/// The input's URL that `url` (from the rewritten playlist) stands for.
func unproxied(_ url: URL) -> String {
  proxiedOrigin(of: url.absoluteString[...]) ?? url.absoluteString
}

func checkSame(_ before: [URL], _ after: [URL], _ what: String) {
  guard before.count == after.count else {
    fatalError("\(what): \(before.count) before, \(after.count) after")
  }
  for (old, new) in zip(before, after) where !sameTarget(unproxied(new), old.absoluteString) {
    fatalError("\(what): \(old.absoluteString) became \(new.absoluteString)")
  }
}

/// Property 4, and the properties of a parsed playlist.
func checkParse(_ input: String, _ output: String) {
  let before = parsed(input, originURL)
  let after = parsed(output, proxiedPlaylistURL)
  switch (before, after) {
  case (.failure(let old), .failure(let new)):
    _ = old.description
    guard shape(old) == shape(new) else { fatalError("parse failed with \(old) before, \(new) after") }
  case (.failure(let old), .success):
    fatalError("the input does not parse (\(old)), its rewrite does")
  case (.success, .failure(let new)):
    fatalError("the input parses, its rewrite does not: \(new)")
  case (.success(.master(let old)), .success(.master(let new))):
    checkSame(old.map(\.uri), new.map(\.uri), "variants")
    for (a, b) in zip(old, new) {
      guard a.bandwidth == b.bandwidth, a.resolution == b.resolution, a.codecs == b.codecs else {
        fatalError("variant attributes changed: \(a) -> \(b)")
      }
      checkSame(a.audioRenditions, b.audioRenditions, "audio renditions")
      checkSame(a.subtitleRenditions, b.subtitleRenditions, "subtitle renditions")
    }
  case (.success(.media(let old)), .success(.media(let new))):
    checkMedia(old)
    guard old.targetDuration == new.targetDuration, old.isEndList == new.isEndList else {
      fatalError("target duration or end list changed")
    }
    checkSame(old.segments, new.segments, "segments")
    checkSame(old.keys, new.keys, "keys")
    checkSame(old.maps, new.maps, "maps")
    checkSame(old.allURIs, new.allURIs, "allURIs")
  case (.success(let old), .success(let new)):
    fatalError("the kind of playlist changed: \(old) -> \(new)")
  }
}

/// What a URI names: URIs that differ only in the scheme's case or in dot segments name the same resource (the
/// proxy's path form of each is the same).
func resource(_ url: URL) -> String { pathForm(url.absoluteString) ?? url.absoluteString }

/// `ProxyPathForm.path(for:)`, remembered for the input being run (`Memo`).
func pathForm(_ url: String) -> String? {
  remembered(&Memo.pathForms, url) { ProxyPathForm.path(for: url) }
}

func checkMedia(_ playlist: HLSPlaylist.MediaPlaylist) {
  let all = playlist.allURIs
  guard Set(all.map(resource)).count == all.count else {
    fatalError("allURIs lists a resource twice: \(all)")
  }
  guard Set(all.map(resource)) == Set((playlist.segments + playlist.keys + playlist.maps).map(resource))
  else {
    fatalError("allURIs is not the segments, keys and maps: \(all)")
  }
  for url in playlist.keys + playlist.maps where !isHTTP(url) {
    fatalError("a key or map that is not http(s): \(url)")
  }
  guard Set(playlist.keys.map(resource)).count == playlist.keys.count,
    Set(playlist.maps.map(resource)).count == playlist.maps.count
  else {
    fatalError("keys or maps listed twice")
  }
}
