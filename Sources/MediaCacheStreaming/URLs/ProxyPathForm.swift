/// Path-form proxy URLs: `/<scheme>/<host[:port]>/<path>[?query]` on the proxy stands for
/// `<scheme>://<host[:port]>/<path>[?query]`, so a relative reference in a playlist, an MPD or a page resolves
/// (RFC 3986) to the proxied form of what it names at the origin, with no rewriting.
///
/// Everything here works on strings, never through `URL`, so that text Foundation would refuse or normalise
/// (a DASH template such as `seg-$Number%05d$.m4s`) is carried byte for byte.
public enum ProxyPathForm {
  /// The path form of `originURL` (an absolute-path reference: `/https/cdn.example.com/v/a.mpd?token=x`), or
  /// nil when it has none: not http or https, no host, userinfo, a bad port, or a character that cannot stand
  /// in a request target. A fragment is kept (a client drops it from the request), dot segments are removed.
  public static func path(for originURL: String) -> String? {
    let parts = URIReference(originURL)
    guard let scheme = parts.scheme?.lowercased(), scheme == "http" || scheme == "https",
      let authority = parts.authority, (try? checkAuthority(authority)) != nil
    else { return nil }
    // Dot segments are removed (RFC 3986 §6.2.2.3: the same resource; `..` at the root is dropped, as a
    // client resolving it would), so the proxy never refuses the path form it gave out.
    let path = parts.path.isEmpty ? "/" : URIReference.removeDotSegments(parts.path).path[...]
    guard isRequestTargetText(path), parts.query.map(isRequestTargetText) ?? true,
      parts.fragment.map(isRequestTargetText) ?? true
    else { return nil }
    // The fragment is kept: a player drops it from the request, but two references that differ only in it
    // stay distinct in a rewritten playlist.
    let result =
      "/\(scheme)/\(writtenAuthority(authority))\(path)\(parts.query.map { "?\($0)" } ?? "")\(parts.fragment.map { "#\($0)" } ?? "")"
    // A DASH template (`$RepresentationID$/../$Number$.m4s`) is substituted before it is resolved: removing a
    // dot segment first could join text across two `$` pairs (anywhere in the URL) into an identifier that was
    // never there. Such a URL has no path form (the caller uses the query form, or leaves the template as
    // written).
    guard !originURL.contains("$") || templateIdentifiers(result[...]) == templateIdentifiers(originURL[...])
    else { return nil }
    return result
  }

  /// The `$…$` runs of a template, in order (a `$` without its closing one ends the list). Found by bytes, as
  /// every delimiter of a URI here (see `Substring.startsWithSlash`).
  static func templateIdentifiers(_ value: Substring) -> [Substring] {
    var result: [Substring] = []
    var rest = value
    while let start = rest.utf8.firstIndex(of: UInt8(ascii: "$")) {
      let after = rest[rest.utf8.index(after: start)...]
      guard let end = after.utf8.firstIndex(of: UInt8(ascii: "$")) else { break }
      let next = rest.utf8.index(after: end)
      result.append(rest[start..<next])
      rest = rest[next...]
    }
    return result
  }

  /// Whether a request path is in path form: it starts with `/http/` or `/https/` (any case).
  package static func isPathForm(_ path: Substring) -> Bool {
    guard path.startsWithSlash else { return false }
    let rest = path.droppingFirstByte
    guard let slash = rest.utf8.firstIndex(of: UInt8(ascii: "/")) else { return false }
    let scheme = rest[..<slash].lowercased()
    return scheme == "http" || scheme == "https"
  }

  /// The origin URL a path-form request stands for. Dot segments are removed first (RFC 3986 §5.2.4), as a
  /// client resolving a reference would have; the query is kept byte for byte.
  ///
  /// - Throws: `ProxyPathFormError` for what cannot be mapped back: a scheme other than http and https, an
  ///   empty host, userinfo, a bad port, a `.` or `..` segment that would climb above the host.
  package static func originURL(path: Substring, query: Substring?) throws(ProxyPathFormError) -> String {
    guard path.startsWithSlash else { throw .init("the path does not start with '/'") }
    let rest = path.droppingFirstByte
    let schemeEnd = rest.utf8.firstIndex(of: UInt8(ascii: "/")) ?? rest.endIndex
    let scheme = rest[..<schemeEnd].lowercased()
    guard scheme == "http" || scheme == "https" else {
      throw .init(
        "unsupported scheme '\(scheme.prefix(40))': path-form URLs are /http/HOST/PATH or /https/HOST/PATH")
    }
    let afterScheme = schemeEnd == rest.endIndex ? rest[schemeEnd...] : rest[schemeEnd...].droppingFirstByte
    let authorityEnd = afterScheme.utf8.firstIndex(of: UInt8(ascii: "/")) ?? afterScheme.endIndex
    let authority = try decodedAuthority(afterScheme[..<authorityEnd])
    try checkAuthority(authority)
    let (originPath, climbed) = URIReference.removeDotSegments(afterScheme[authorityEnd...])
    if climbed { throw .init("a '..' segment climbs above the host") }
    let query = query.map { "?\($0)" } ?? ""
    return "\(scheme)://\(authority)\(originPath.isEmpty ? "/" : originPath)\(query)"
  }

  /// How a reference found in a document at `base` (its origin URL, or the effective base URL there) must be
  /// written so that, resolved against the document's proxied path-form URL, it reaches the proxied form of
  /// its target; nil when it can stay as written.
  ///
  /// A relative-path reference (`seg1.ts`, `../audio/init.mp4`) stays, unless its `..` segments climb above
  /// the origin's root (they would climb into the proxy's `/<scheme>/<host>` prefix). An absolute http(s)
  /// URI, a network-path reference (`//cdn/x`) and an absolute-path reference (`/x`) are resolved and
  /// written in path form, fragment kept. Anything else (`data:`, `skd://`, an http URL with userinfo) stays.
  public static func rewrittenReference(_ reference: String, base: String) -> String? {
    let parts = URIReference(reference)
    if parts.scheme == nil, parts.authority == nil, !parts.path.startsWithSlash {
      guard URIReference.resolvingClimbsAboveRoot(reference, against: base) else { return nil }
    }
    return forcedReference(reference, base: base)
  }

  /// Whether `reference`, found in a document at `base`, resolves through the document's path-form URL to
  /// the proxied form of its target as it is: a relative-path reference whose `..` segments stay under the
  /// origin's root. Anything else must be rewritten (see `rewrittenReference`) or, if it has no path form,
  /// rewritten to the query form.
  public static func keepsReference(_ reference: String, base: String) -> Bool {
    let parts = URIReference(reference)
    // By bytes: `hasPrefix` compares characters, and "/" followed by a combining mark (U+059D, say) is one
    // character that is not "/", although the reference is an absolute path (found by the HLS fuzzer).
    guard parts.scheme == nil, parts.authority == nil, !parts.path.startsWithSlash else {
      return false
    }
    return !URIReference.resolvingClimbsAboveRoot(reference, against: base)
  }

  /// `reference` resolved against `base` and written in path form (fragment kept); nil if the target has no
  /// path form (not http or https, userinfo, ...).
  static func forcedReference(_ reference: String, base: String) -> String? {
    let target = URIReference.resolve(reference, against: base)
    // Resolving removes dot segments too: a template must keep its identifiers (see `path(for:)`).
    guard !reference.contains("$") || templateIdentifiers(target[...]) == templateIdentifiers(reference[...])
    else { return nil }
    return path(for: target)
  }

  /// The authority as the host segment of a path form: an IP literal's brackets percent-encoded (`[` and `]`
  /// may not stand in a path, RFC 3986 §3.3; Foundation's `URLComponents` encodes them, and a client that
  /// refuses them would not resolve the reference at all), everything else as it is.
  static func writtenAuthority(_ authority: Substring) -> Substring {
    guard authority.utf8.first == UInt8(ascii: "[") else { return authority }
    return Substring(authority.replacing("[", with: "%5B").replacing("]", with: "%5D"))
  }

  /// The host segment of a path-form request with its percent-encoded octets decoded (`%5B::1%5D:8080` is
  /// `[::1]:8080`: the form `path(for:)` writes, and what a client that encodes the brackets sends), to be
  /// checked by `checkAuthority` as it is then.
  ///
  /// - Throws: `ProxyPathFormError` for a `%` not followed by two hex digits, or octets that are not UTF-8.
  static func decodedAuthority(_ segment: Substring) throws(ProxyPathFormError) -> Substring {
    guard segment.utf8.contains(UInt8(ascii: "%")) else { return segment }
    guard let decoded = segment.percentDecoded else {
      throw .init(
        "bad percent-encoding in the host segment '\(segment.prefix(60))' (a '%' and two hex digits, of UTF-8)"
      )
    }
    return decoded[...]
  }

  /// Refuses an authority that cannot be mapped back to an origin: empty host, userinfo, bad port, a
  /// character outside a host name or IP literal.
  static func checkAuthority(_ authority: Substring) throws(ProxyPathFormError) {
    if authority == "." || authority == ".." {
      throw .init("a '\(authority)' segment stands where the host should be")
    }
    // The common case, a host name or IPv4 address with an optional port, is checked on bytes.
    if isPlainHostAndPort(authority.utf8) { return }
    if authority.contains("@") { throw .init("userinfo ('user@') is not accepted in the host segment") }
    var host = authority
    var port: Substring?
    if authority.hasPrefix("[") {
      guard let close = authority.firstIndex(of: "]") else { throw .init("the IP literal has no ']'") }
      host = authority[...close]
      let after = authority[authority.index(after: close)...]
      if !after.isEmpty {
        guard after.hasPrefix(":") else { throw .init("unexpected text after the IP literal") }
        port = after.dropFirst()
      }
      let inner = host.dropFirst().dropLast()
      guard !inner.isEmpty, inner.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
        throw .init("'\(host.prefix(60))' is not an IPv6 literal")
      }
    } else if let colon = authority.firstIndex(of: ":") {
      host = authority[..<colon]
      port = authority[authority.index(after: colon)...]
    }
    if host.isEmpty { throw .init("the host is empty") }
    let hostCharacters = host.unicodeScalars.allSatisfy {
      switch $0 {
      case "a"..."z", "A"..."Z", "0"..."9", "-", ".", "_", "~", "[", "]", ":": true
      default: false
      }
    }
    if !hostCharacters {
      throw .init("the host '\(host.prefix(60))' has a character a host name cannot hold")
    }
    if let port {
      guard !port.isEmpty, port.count <= 5, port.allSatisfy({ $0.isASCII && $0.isNumber }),
        let number = Int(port), number <= 65535
      else { throw .init("bad port '\(port.prefix(20))' (a number from 0 to 65535)") }
    }
  }

  /// Whether `authority` is `host[:port]` with a host of letters, digits, '-' and '.' and a port of 1 to 5
  /// digits up to 65535.
  private static func isPlainHostAndPort(_ authority: Substring.UTF8View) -> Bool {
    var hostLength = 0
    var port: Int?
    var portDigits = 0
    for byte in authority {
      if var value = port {
        guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte), portDigits < 5 else { return false }
        value = value * 10 + Int(byte - UInt8(ascii: "0"))
        port = value
        portDigits += 1
        continue
      }
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."):
        hostLength += 1
      case UInt8(ascii: ":"):
        port = 0
      default:
        return false
      }
    }
    if hostLength == 0 { return false }
    if let port { return portDigits > 0 && port <= 65535 }
    return true
  }

  /// Whether every character may stand in a request target as sent (RFC 3986 unreserved, reserved and `%`).
  private static func isRequestTargetText(_ text: Substring) -> Bool {
    text.unicodeScalars.allSatisfy {
      switch $0 {
      case "a"..."z", "A"..."Z", "0"..."9", "-", ".", "_", "~", "%", ":", "/", "?", "#", "[", "]", "@", "!",
        "$",
        "&", "'", "(", ")", "*", "+", ",", ";", "=":
        true
      default: false
      }
    }
  }
}

/// Why a path-form request cannot be mapped to an origin URL (answered with 400 and this reason).
public struct ProxyPathFormError: Error, Sendable, Equatable, CustomStringConvertible {
  /// One line saying what is wrong.
  public var reason: String
  init(_ reason: String) { self.reason = reason }
  /// One line for a person, as the proxy's `400` body says it.
  public var description: String { "path-form URL refused: \(reason)" }
}

/// A URI reference split into its five parts (RFC 3986 appendix B), on the text as written, with resolution
/// (§5.2) done on strings.
struct URIReference {
  var scheme: Substring?
  var authority: Substring?
  var path: Substring
  var query: Substring?
  var fragment: Substring?

  init(_ text: String) { self.init(Substring(text)) }

  init(_ text: Substring) {
    // Scanned as UTF-8 bytes (the delimiters are ASCII): an MPD can hold tens of thousands of URLs.
    var rest = text
    if let hash = rest.utf8.firstIndex(of: UInt8(ascii: "#")) {
      fragment = rest[rest.utf8.index(after: hash)...]
      rest = rest[..<hash]
    }
    if let mark = rest.utf8.firstIndex(of: UInt8(ascii: "?")) {
      query = rest[rest.utf8.index(after: mark)...]
      rest = rest[..<mark]
    }
    // A scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) before the first ':', which must come before any
    // '/' (otherwise the colon is in a path segment).
    if let colon = rest.utf8.firstIndex(of: UInt8(ascii: ":")), let first = rest.utf8.first,
      Self.isLetter(first),
      rest.utf8[..<colon].allSatisfy({
        Self.isLetter($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "+")
          || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
      })
    {
      scheme = rest[..<colon]
      rest = rest[rest.utf8.index(after: colon)...]
    }
    if rest.utf8.starts(with: "//".utf8) {
      let afterSlashes = rest[rest.utf8.index(rest.startIndex, offsetBy: 2)...]
      let end = afterSlashes.utf8.firstIndex(of: UInt8(ascii: "/")) ?? afterSlashes.endIndex
      authority = afterSlashes[..<end]
      rest = afterSlashes[end...]
    }
    path = rest
  }

  private static func isLetter(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
  }

  /// RFC 3986 §5.2.2 (strict): `reference` resolved against the absolute URI `base`.
  static func resolve(_ reference: String, against base: String) -> String {
    resolveParts(reference, against: base).text
  }

  /// Whether resolving the relative `reference` against `base` has a `..` climb above the root.
  static func resolvingClimbsAboveRoot(_ reference: String, against base: String) -> Bool {
    resolveParts(reference, against: base).climbed
  }

  private static func resolveParts(_ reference: String, against base: String) -> (text: String, climbed: Bool)
  {
    let r = URIReference(reference)
    let b = URIReference(base)
    var scheme = r.scheme
    var authority = r.authority
    var path: String
    var query = r.query
    var climbed = false
    if r.scheme != nil {
      (path, climbed) = removeDotSegments(r.path)
    } else {
      scheme = b.scheme
      if r.authority != nil {
        (path, climbed) = removeDotSegments(r.path)
      } else {
        authority = b.authority
        if r.path.isEmpty {
          path = String(b.path)
          if r.query == nil { query = b.query }
        } else if r.path.startsWithSlash {
          (path, climbed) = removeDotSegments(r.path)
        } else {
          let merged: String
          if b.authority != nil, b.path.isEmpty {
            merged = "/" + r.path
          } else {
            let directory =
              b.path.utf8.lastIndex(of: UInt8(ascii: "/")).map { b.path[..<b.path.utf8.index(after: $0)] }
              ?? ""
            merged = String(directory) + r.path
          }
          (path, climbed) = removeDotSegments(Substring(merged))
        }
      }
    }
    var text = ""
    if let scheme { text += "\(scheme):" }
    if let authority { text += "//\(authority)" }
    text += path
    if let query { text += "?\(query)" }
    if let fragment = r.fragment { text += "#\(fragment)" }
    return (text, climbed)
  }

  /// RFC 3986 §5.2.4, segment by segment; `climbed` tells whether a `..` had nothing left to remove (at the
  /// root), which the RFC ignores but a path-form URL cannot (it would eat the host segment).
  static func removeDotSegments(_ path: Substring) -> (path: String, climbed: Bool) {
    if path.isEmpty { return ("", false) }
    // Most paths have no dot segment: a segment starts at the beginning or after a '/', so without a '.' in
    // either place there is nothing to remove.
    var previous = UInt8(ascii: "/")
    var mayHaveDotSegment = false
    for byte in path.utf8 {
      if byte == UInt8(ascii: "."), previous == UInt8(ascii: "/") {
        mayHaveDotSegment = true
        break
      }
      previous = byte
    }
    if !mayHaveDotSegment { return (String(path), false) }
    // By bytes, not characters: a "/" followed by a combining mark is one `Character`, and a split on
    // characters would not cut there.
    let absolute = path.startsWithSlash
    var segments = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map {
      Substring($0)
    }
    if absolute { segments.removeFirst() }
    var output: [Substring] = []
    var climbed = false
    for (index, segment) in segments.enumerated() {
      let isLast = index == segments.count - 1
      if segment.utf8.elementsEqual(".".utf8) {
        if isLast { output.append("") }
      } else if segment.utf8.elementsEqual("..".utf8) {
        if output.isEmpty { climbed = true } else { output.removeLast() }
        if isLast { output.append("") }
      } else {
        output.append(segment)
      }
    }
    return ((absolute ? "/" : "") + output.joined(separator: "/"), climbed)
  }
}
