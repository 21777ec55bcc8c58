import MediaCache
import MediaCacheHTTP
import MediaCacheStreaming
import Testing

/// Every error's `code` is named after its case (`ErrorCode(caseOf:)` reads the case name), for every case of
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
      (.unexpectedFileType(path: "/p", expected: "file", found: "fifo"), .unexpectedFileType),
    ]
    for (error, code) in store { #expect(error.code == code, "\(error)") }
    #expect(Set(store.map { $0.1 }).count == store.count)
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
      (.connectionFailed(url: "u", reason: "r", attempts: 1), .connectionFailed),
      (.timedOut(url: "u", reason: "r", attempts: 2), .timedOut),
      (.inconsistentResponse(url: "u", reason: "r"), .inconsistentResponse),
      (.malformedResponse(url: "u", reason: "r"), .malformedResponse),
      (.tlsFailed(url: "u", reason: "r"), .tlsFailed),
      (.invalidTrustRoots(source: "CA file", path: "/ca", reason: "r"), .invalidTrustRoots),
    ]
    for (error, code) in origin { #expect(error.code == code, "\(error)") }
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
    #expect(hls.map(\.0.line) == [nil, 2, 3, nil, 4])
    let mpd: [(MPDError, MPDError.Code)] = [
      (.tooLarge(url: "u", bytes: 2, limit: 1), .tooLarge),
      (.malformed(url: "u", line: 1, column: 2, reason: "r"), .malformed),
      (.notAnMPD(url: "u", root: nil), .notAnMPD), (.documentType(url: "u"), .documentType),
      (.notUTF8(url: "u"), .notUTF8),
      (.processingInstruction(url: "u"), .processingInstruction),
    ]
    for (error, code) in mpd { #expect(error.code == code && error.url == "u", "\(error)") }
    let segments: [(MPDSegmentError, MPDSegmentError.Code)] = [
      (.tooLarge(url: "u", bytes: 2, limit: 1), .tooLarge),
      (.malformedXML(url: "u", line: 1, reason: "r"), .malformedXML),
      (.notAnMPD(url: "u", root: "html"), .notAnMPD), (.documentType(url: "u"), .documentType),
      (.invalid(url: "u", at: "a", reason: "r"), .invalid),
      (.unsupported(url: "u", at: "a", feature: "f"), .unsupported),
      (.dynamic(url: "u"), .dynamic), (.tooManySegments(url: "u", at: "a", limit: 1), .tooManySegments),
    ]
    for (error, code) in segments { #expect(error.code == code && error.url == "u", "\(error)") }
  }
}
