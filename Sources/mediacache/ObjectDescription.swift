import Foundation
import MediaCache

/// `mediacache inspect`: the manifest fields of one object, its bytes on disk and its files.
struct ObjectDescription: Codable, Equatable {
  var objectID: ObjectID
  /// `none`, `partial` or `complete`.
  var state: String
  var contentLength: Int64?
  var chunkSize: Int
  var chunkCount: Int?
  var presentChunks: Int
  /// Runs of present chunks, `[first, endExclusive]`.
  var presentChunkRuns: [Range<Int>]
  var cachedBytes: Int64
  var contentType: String?
  var etag: String?
  var lastModified: String?
  var createdAt: Date
  var pinned: Bool
  var userMetadataBytes: Int
  var group: String?
  var diskBytes: Int64
  var dataPath: String
  var manifestPath: String

  init(_ manifest: Manifest, store: ShardedStore) throws {
    let paths = store.paths(for: manifest.objectID)
    objectID = manifest.objectID
    state = MediaCache.status(of: manifest).stateName
    contentLength = manifest.contentLength
    chunkSize = manifest.chunkSize
    chunkCount = manifest.chunkCount
    presentChunks = manifest.chunkCRCs.count
    presentChunkRuns = manifest.presentChunks.ranges
    cachedBytes = manifest.cachedBytes
    contentType = manifest.contentType
    etag = manifest.etag
    lastModified = manifest.lastModified
    createdAt = manifest.createdAt
    pinned = manifest.isPinned
    userMetadataBytes = manifest.userMetadata.count
    group = manifest.group
    diskBytes = try store.diskUsage(manifest.objectID)
    dataPath = paths.data
    manifestPath = paths.manifest
  }

  /// Every field in the order `inspect` shows them; null for what is unknown.
  var fields: [(String, any Encodable)] {
    [
      ("objectID", objectID), ("state", state), ("contentLength", contentLength), ("chunkSize", chunkSize),
      ("chunkCount", chunkCount), ("presentChunks", presentChunks), ("presentChunkRuns", presentChunkRuns),
      ("cachedBytes", cachedBytes), ("contentType", contentType), ("etag", etag),
      ("lastModified", lastModified), ("createdAt", createdAt), ("pinned", pinned),
      ("userMetadataBytes", userMetadataBytes), ("group", group), ("diskBytes", diskBytes),
      ("dataPath", dataPath),
      ("manifestPath", manifestPath),
    ]
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: FieldKey.self)
    for (name, value) in fields { try container.encode(value, forKey: FieldKey(name)) }
  }

  /// `name: value` lines, each value as in the JSON.
  func humanLines() throws -> [String] {
    try fields.map { "\($0.0): \(try ReportJSON.encode($0.1))" }
  }
}

/// A key named at run time.
struct FieldKey: CodingKey {
  var stringValue: String
  var intValue: Int? { nil }
  init(_ name: String) { stringValue = name }
  init(stringValue: String) { self.stringValue = stringValue }
  init?(intValue: Int) { nil }
}
