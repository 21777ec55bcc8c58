import Foundation
import Testing

@testable import MediaCache

/// A manifest with several chunk runs and every optional field set.
func richManifest(key: String = "https://example.com/rich.mp4") -> Manifest {
  var manifest = Manifest(
    objectID: ObjectID(CacheKey(key)), chunkSize: 4096, contentLength: 100_000,
    createdAt: Date(timeIntervalSince1970: 1_700_000_000.5), contentType: "video/mp4", etag: "\"abc-123\"",
    lastModified: "Tue, 14 Nov 2023 22:13:20 GMT", isPinned: true, userMetadata: Data("hello".utf8))
  for index in [0, 1, 2, 5, 9, 10, 24] {
    manifest.setChunk(index, crc: UInt32(truncatingIfNeeded: index &* 0x9E37_79B9 &+ 7))
  }
  return manifest
}

/// Compares two manifests field by field, so that a failure names the field that differs.
func expectSameManifest(
  _ actual: Manifest, _ expected: Manifest, _ context: String = "",
  sourceLocation: SourceLocation = #_sourceLocation
) {
  #expect(actual.objectID == expected.objectID, "objectID \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.contentLength == expected.contentLength, "contentLength \(context)", sourceLocation: sourceLocation
  )
  #expect(actual.chunkSize == expected.chunkSize, "chunkSize \(context)", sourceLocation: sourceLocation)
  #expect(actual.chunkCRCs == expected.chunkCRCs, "chunk CRCs \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.contentType == expected.contentType, "contentType \(context)", sourceLocation: sourceLocation)
  #expect(actual.etag == expected.etag, "etag \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.lastModified == expected.lastModified, "lastModified \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.createdAt.timeIntervalSince1970 == expected.createdAt.timeIntervalSince1970,
    "createdAt \(context)", sourceLocation: sourceLocation)
  #expect(actual.isPinned == expected.isPinned, "isPinned \(context)", sourceLocation: sourceLocation)
  #expect(
    actual.userMetadata == expected.userMetadata, "userMetadata \(context)", sourceLocation: sourceLocation)
  #expect(actual.versionTag == expected.versionTag, "versionTag \(context)", sourceLocation: sourceLocation)
}

/// The fields in which two manifests differ, each with both values, for failure messages.
func manifestDifferences(_ a: Manifest, _ b: Manifest) -> [String] {
  var result: [String] = []
  func check<T: Equatable>(_ name: String, _ x: T, _ y: T) {
    if x != y { result.append("\(name): \(x) vs \(y)") }
  }
  check("objectID", a.objectID, b.objectID)
  check("contentLength", a.contentLength, b.contentLength)
  check("chunkSize", a.chunkSize, b.chunkSize)
  check("chunkCRCs", a.chunkCRCs, b.chunkCRCs)
  check("contentType", a.contentType, b.contentType)
  check("etag", a.etag, b.etag)
  check("lastModified", a.lastModified, b.lastModified)
  check("createdAt (s since 1970)", a.createdAt.timeIntervalSince1970, b.createdAt.timeIntervalSince1970)
  check("isPinned", a.isPinned, b.isPinned)
  check("userMetadata", a.userMetadata, b.userMetadata)
  check("versionTag", a.versionTag, b.versionTag)
  return result
}
