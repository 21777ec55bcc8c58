import MediaCache
import MediaCacheHTTP
import MediaCacheStreaming
import Testing

/// Every error's `code` is named after its case (`ErrorCode.init(caseOf:)` reads the case name), for every case of
/// every error type, and its message says what it should.
@Suite struct ErrorCodeTests {
  let id = ObjectID(CacheKey("k"))

  @Test func storeAndManifestErrors() {
    let store: [(StoreError, StoreError.Code)] = [
      (.io(operation: "pread", path: "/p", errno: .noSpace), .io), (.noSuchCache(path: "/c"), .noSuchCache),
      (.notACache(path: "/c"), .notACache),
      (.unsupportedFormat(path: "/c", found: "9.0"), .unsupportedFormat),
      (.busy(id), .busy), (.notFound(id), .notFound), (.notCached(id, missing: [0..<1]), .notCached),
      (.corruptChunk(id, chunk: 1, expected: 2, actual: 3), .corruptChunk),
      (.corruptManifest(id, path: "/m", .trailingBytes(count: 1)), .corruptManifest),
      (.outOfBounds(id, range: 0..<1, length: nil), .outOfBounds),
      (.lengthConflict(id, recorded: 1, declared: 2), .lengthConflict),
      (.fieldTooLarge(field: "ETag", size: 2, limit: 1), .fieldTooLarge), (.closed(id), .closed),
      (.kept(id), .kept),
      (.versionChanged(id, expected: 1, current: 2), .versionChanged),
      (.invalidConfiguration("x"), .invalidConfiguration),
      (.invalidGroup("g", reason: "r"), .invalidGroup),
      (.invalidNamespace("n", reason: "r"), .invalidNamespace),
      (.noSuchNamespace("n"), .noSuchNamespace),
      (.unexpectedFileType(path: "/p", expected: "file", found: "fifo"), .unexpectedFileType),
    ]
    for (error, code) in store { #expect(error.code == code, "\(error)") }
    #expect(Set(store.map { $0.1 }).count == store.count)
    #expect(Set(store.map { $0.1 }) == Set(StoreError.Code.allCases))
    let manifest: [(ManifestError, ManifestError.Code)] = [
      (.truncated(needed: 1, available: 0, field: "f"), .truncated), (.badMagic(found: [1]), .badMagic),
      (.unsupportedVersion(major: 2, minor: 0), .unsupportedVersion),
      (.checksumMismatch(stored: 1, computed: 2), .checksumMismatch),
      (.invalidField(name: "n", reason: "r"), .invalidField),
      (.objectIDMismatch(expected: id, found: id), .objectIDMismatch),
      (.trailingBytes(count: 1), .trailingBytes),
    ]
    for (error, code) in manifest { #expect(error.code == code, "\(error)") }
    #expect(
      Set(manifest.map { $0.1 }) == Set(ManifestError.Code.allCases), "every code of ManifestError is listed")
    #expect(
      StoreError.corruptManifest(id, path: "/m", .trailingBytes(count: 1)).cause as? ManifestError
        == .trailingBytes(count: 1))
  }

  @Test func originAndStreamingErrors() {
    let origin: [(OriginError, OriginError.Code)] = [
      (.unsupportedScheme(url: "u"), .unsupportedScheme), (.invalidURL("u"), .invalidURL),
      (.httpStatus(url: "u", status: 404, attempts: 1), .httpStatus),
      (.rangeNotSatisfiable(url: "u", range: "r", length: nil), .rangeNotSatisfiable),
      (.contentRangeMismatch(url: "u", requested: "a", received: "b"), .contentRangeMismatch),
      (.truncatedBody(url: "u", expected: 2, received: 1, attempts: 1), .truncatedBody),
      (.unsupportedContentEncoding(url: "u", encoding: "gzip"), .unsupportedContentEncoding),
      (.tooManyRedirects(url: "u"), .tooManyRedirects),
      (.redirectNotAllowed(url: "u", location: "http://h/x"), .redirectNotAllowed),
      (.connectionFailed(url: "u", reason: "r", attempts: 1), .connectionFailed),
      (.timedOut(url: "u", reason: "r", attempts: 2), .timedOut),
      (.inconsistentResponse(url: "u", reason: "r"), .inconsistentResponse),
      (.malformedResponse(url: "u", reason: "r"), .malformedResponse),
      (.tlsFailed(url: "u", reason: "r"), .tlsFailed),
      (.invalidTrustRoots(source: "CA file", path: "/ca", reason: "r"), .invalidTrustRoots),
      (.objectChanged(url: "u", cause: ""), .objectChanged),
      (.invalidHeader(name: "n", reason: "r"), .invalidHeader),
      (.notStorable(url: "u", reason: "r"), .notStorable),
    ]
    for (error, code) in origin { #expect(error.code == code, "\(error)") }
    #expect(Set(origin.map { $0.1 }) == Set(OriginError.Code.allCases), "every code of OriginError is listed")
    #expect(OriginError.httpStatus(url: "u", status: 404, attempts: 3).status == 404)
    #expect(OriginError.timedOut(url: "u", reason: "r", attempts: 2).attempts == 2)
    #expect(OriginError.invalidTrustRoots(source: "CA file", path: "/ca", reason: "r").path == "/ca")
    let hls: [(HLSError, HLSError.Code)] = [
      (.notAPlaylist(url: "u", firstLine: ""), .notAPlaylist),
      (.malformedLine(url: "u", line: 2, reason: "r"), .malformedLine),
      (.unresolvableURI(url: "u", line: 3, uri: "x"), .unresolvableURI),
      (.tooLarge(url: "u", bytes: 2, limit: 1), .tooLarge),
      (.invalidReplacement(url: "u", line: 4, reason: "r"), .invalidReplacement),
    ]
    for (error, code) in hls { #expect(error.code == code && error.url == "u", "\(error)") }
    #expect(Set(hls.map { $0.1 }) == Set(HLSError.Code.allCases), "every code of HLSError is listed")
    #expect(hls.map(\.0.line) == [nil, 2, 3, nil, 4])
    let mpd: [(MPDError, MPDError.Code)] = [
      (.tooLarge(url: "u", bytes: 2, limit: 1), .tooLarge),
      (.malformed(url: "u", line: 1, column: 2, reason: "r"), .malformed),
      (.notAnMPD(url: "u", root: nil), .notAnMPD), (.documentType(url: "u"), .documentType),
      (.notUTF8(url: "u"), .notUTF8),
      (.processingInstruction(url: "u"), .processingInstruction),
      (.invalid(url: "u", at: "a", reason: "r"), .invalid),
      (.unsupported(url: "u", at: "a", feature: "f"), .unsupported),
      (.dynamic(url: "u"), .dynamic), (.tooManySegments(url: "u", at: "a", limit: 1), .tooManySegments),
    ]
    for (error, code) in mpd { #expect(error.code == code && error.url == "u", "\(error)") }
    #expect(Set(mpd.map { $0.1 }) == Set(MPDError.Code.allCases), "every code of MPDError is listed")
    let mp4: [(MP4Error, MP4Error.Code)] = [
      (.init(url: "u", kind: .invalidBox(type: "moov", offset: 8, reason: "r")), .invalidBox),
      (.init(url: "u", kind: .noMovieBox), .noMovieBox),
      (.init(url: "u", kind: .tooLarge(type: "moov", bytes: 2, limit: 1)), .tooLarge),
      (.init(url: "u", kind: .invalidTable(track: 1, box: "stco", reason: "r")), .invalidTable),
      (.init(url: "u", kind: .fragmented), .fragmented),
    ]
    for (error, code) in mp4 { #expect(error.code == code && error.url == "u", "\(error)") }
    #expect(Set(mp4.map { $0.1 }) == Set(MP4Error.Code.allCases), "every code of MP4Error is listed")
  }
}

/// What each error with a URL says, to the byte, what its `url` is, and when two errors are equal: the same
/// URL and the same details.
@Suite struct ErrorMessageTests {
  /// A case with no payload is named as one with a payload (`ErrorCode.init(caseOf:)` reads the text up to `(`).
  @Test func codeOfACaseWithoutPayload() {
    enum Kind: Sendable { case bare, labelled(url: String), unlabelled(Int, Int) }
    enum Code: String, ErrorCode { case bare, labelled, unlabelled }
    #expect(Code(caseOf: Kind.bare).description == "bare")
    #expect(Code(caseOf: Kind.labelled(url: "u(1)")) == .labelled)
    #expect(Code(caseOf: Kind.unlabelled(1, 2)).description == "unlabelled")
  }

  @Test func originMessages() {
    let origin: [(OriginError, String?, String)] = [
      (.unsupportedScheme(url: "u"), "u", "u: only http and https URLs can be fetched"),
      (.invalidURL("u"), "u", "u is not a valid URL"),
      (.httpStatus(url: "u", status: 404, attempts: 1), "u", "u: origin answered HTTP 404"),
      (
        .httpStatus(url: "u", status: 503, attempts: 3), "u", "u: origin answered HTTP 503 (after 3 attempts)"
      ),
      (.rangeNotSatisfiable(url: "u", range: "r", length: nil), "u", "u: origin refused range r (416)"),
      (
        .rangeNotSatisfiable(url: "u", range: "r", length: 5), "u",
        "u: origin refused range r (416); length is 5"
      ),
      (
        .contentRangeMismatch(url: "u", requested: "a", received: "b"), "u",
        "u: asked for bytes a, origin sent Content-Range b"
      ),
      (
        .truncatedBody(url: "u", expected: 2, received: 1, attempts: 1), "u",
        "u: body ended after 1 of 2 bytes (1 attempts)"
      ),
      (
        .unsupportedContentEncoding(url: "u", encoding: "gzip"), "u",
        "u: origin sent Content-Encoding gzip although identity was asked for"
      ),
      (.tooManyRedirects(url: "u"), "u", "u: too many redirects"),
      (
        .redirectNotAllowed(url: "u", location: "http://h/x"), "u",
        "u: origin redirected to http://h/x, whose host is not an allowed host"
      ),
      (.connectionFailed(url: "u", reason: "r", attempts: 1), "u", "u: r (after 1 attempt)"),
      (.timedOut(url: "u", reason: "r", attempts: 2), "u", "u: timed out: r (after 2 attempts)"),
      (.inconsistentResponse(url: "u", reason: "r"), "u", "u: r"),
      (.malformedResponse(url: "u", reason: "r"), "u", "u: malformed response: r"),
      (.tlsFailed(url: "u", reason: "r"), "u", "u: r"),
      (.invalidTrustRoots(source: "CA file", path: "/ca", reason: "r"), nil, "CA file /ca: r"),
      (.objectChanged(url: "u", cause: ""), "u", "u: the object changed version while it was being read"),
      (
        .objectChanged(url: "u", cause: "c"), "u", "u: the object changed version while it was being read (c)"
      ),
    ]
    for (error, url, description) in origin {
      #expect(error.url == url, "\(error)")
      #expect(error.description == description)
    }
    #expect(OriginError.invalidTrustRoots(source: "CA file", path: "/ca", reason: "r").path == "/ca")
    #expect(OriginError.tooManyRedirects(url: "u").path == nil)
    #expect(OriginError.tooManyRedirects(url: "u") == .tooManyRedirects(url: "u"))
    #expect(OriginError.tooManyRedirects(url: "u") != .tooManyRedirects(url: "v"))
    #expect(OriginError.invalidURL("u") != .unsupportedScheme(url: "u"))
    #expect(
      OriginError.timedOut(url: "u", reason: "r", attempts: 1)
        != .timedOut(url: "u", reason: "r", attempts: 2))
  }

  @Test func streamingMessages() {
    let hls: [(HLSError, String)] = [
      (
        .notAPlaylist(url: "u", firstLine: "x"),
        "u is not an HLS playlist: its first line is 'x', not #EXTM3U"
      ),
      (.malformedLine(url: "u", line: 2, reason: "r"), "u line 2: r"),
      (
        .unresolvableURI(url: "u", line: 3, uri: "x"),
        "u line 3: URI 'x' cannot be resolved against the playlist's URL"
      ),
      (.tooLarge(url: "u", bytes: 2, limit: 1), "u: playlist of 2 bytes is larger than the limit of 1 bytes"),
      (.invalidReplacement(url: "u", line: 4, reason: "r"), "u line 4: cannot rewrite the URI: r"),
    ]
    for (error, description) in hls { #expect(error.url == "u" && error.description == description) }
    #expect(
      HLSError.malformedLine(url: "u", line: 2, reason: "r") != .malformedLine(url: "v", line: 2, reason: "r")
    )
    let mpd: [(MPDError, String)] = [
      (.tooLarge(url: "u", bytes: 2, limit: 1), "u: MPD of 2 bytes is larger than the limit of 1 bytes"),
      (
        .malformed(url: "u", line: 1, column: 2, reason: "r"),
        "u is not a DASH MPD: malformed XML at line 1 column 2: r"
      ),
      (
        .malformed(url: "u", line: 1, column: nil, reason: "r"),
        "u is not a DASH MPD: malformed XML at line 1: r"
      ),
      (.notAnMPD(url: "u", root: nil), "u is not a DASH MPD: it has no root element"),
      (.notAnMPD(url: "u", root: "html"), "u is not a DASH MPD: its root element is <html>, not <MPD>"),
      (
        .documentType(url: "u"),
        "u: the MPD has a document type declaration (<!DOCTYPE), which is not accepted"
      ),
      (.notUTF8(url: "u"), "u is not a DASH MPD: it is not UTF-8 text"),
      (
        .processingInstruction(url: "u"),
        "u: the MPD has a processing instruction (<?...?>) other than the XML declaration, which is not accepted"
      ),
      (.invalid(url: "u", at: "a", reason: "r"), "u: a: r"),
      (.unsupported(url: "u", at: "a", feature: "f"), "u: a: f is not supported"),
      (
        .dynamic(url: "u"),
        "u is a live MPD (type=\"dynamic\"); only static (on-demand) MPDs can be fetched"
      ),
      (
        .tooManySegments(url: "u", at: "a", limit: 1),
        "u: a: more than 1 segments (raise the limit if this is intended)"
      ),
    ]
    for (error, description) in mpd { #expect(error.url == "u" && error.description == description) }
    #expect(MPDError.notUTF8(url: "u") == .notUTF8(url: "u"))
    #expect(MPDError.notUTF8(url: "u") != .notUTF8(url: "v"))
    #expect(MPDError.dynamic(url: "u") == .dynamic(url: "u"))
    #expect(MPDError.dynamic(url: "u") != .dynamic(url: "v"))
    #expect(MPDError.dynamic(url: "u") != .documentType(url: "u"))
  }
}
