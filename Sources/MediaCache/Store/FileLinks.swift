import Foundation

/// `files/<id hex>.<extension>`: symbolic links to complete objects' data files, named with the extension of
/// their content type, so that a player that picks its demuxer by the file name (AVPlayer with a file URL, a
/// media framework) can open an object without a copy (`MediaCache.fileURL(for:)`). The target is relative
/// (`../objects/ab/cd/<hex>.data`), so the cache directory can move. A link is a convenience, never the
/// truth: removing the object leaves it dangling until the next compaction pass unlinks it, and no tool ever
/// follows one into the tree.
extension ShardedStore {
  /// `<root>/files`.
  package var fileLinksDirectory: String { "\(root)/files" }

  /// The link for object `id` with `pathExtension`, made if missing: its path. The object is expected to be
  /// complete (the caller checked its manifest).
  package func fileLink(_ id: ObjectID, pathExtension: String) throws -> String {
    let path = "\(fileLinksDirectory)/\(id.hex).\(pathExtension)"
    let (first, second) = id.shardComponents
    try mapIO {
      try FileSystemCalls.makeDirectory(fileLinksDirectory)
      try FileSystemCalls.makeSymbolicLink(path, to: "../objects/\(first)/\(second)/\(id.hex).data")
    }
    return path
  }

  /// Unlinks the links in `files/` whose data file is gone (with `dryRun`, only counts them); returns how
  /// many. Entries that are not links of this form are left alone.
  @discardableResult
  package func reapDanglingFileLinks(dryRun: Bool = false) throws -> Int {
    var removed = 0
    for name in try mapIO({ try FileSystemCalls.directoryEntries(fileLinksDirectory) }) ?? [] {
      guard let id = Self.linkedObject(name) else { continue }
      let path = "\(fileLinksDirectory)/\(name)"
      guard try mapIO({ try FileSystemCalls.fileType(path) }) == .symlink,
        try mapIO({ try FileSystemCalls.status(paths(for: id).data) }) == nil
      else { continue }
      if dryRun {
        removed += 1
      } else if try mapIO({ try FileSystemCalls.unlinkFile(path) }) {
        removed += 1
      }
    }
    return removed
  }

  /// The object a name in `files/` links to (`<64 hex>.<extension>`), nil for any other name.
  package static func linkedObject(_ name: String) -> ObjectID? {
    guard name.utf8.count > 65,
      name.utf8[name.utf8.index(name.utf8.startIndex, offsetBy: 64)] == UInt8(ascii: ".")
    else { return nil }
    return ObjectID(hex: name.prefix(64))
  }
}

/// The file name extension of a content type, for `files/` links: the common media, playlist, subtitle and
/// image types; nil for others (their file URL is the data file's).
package enum MediaFileExtension {
  static let byType: [String: String] = [
    "video/mp4": "mp4", "video/quicktime": "mov", "video/x-m4v": "m4v", "video/webm": "webm",
    "video/x-matroska": "mkv", "video/mp2t": "ts", "video/iso.segment": "m4s", "video/mpeg": "mpg",
    "audio/mp4": "m4a", "audio/x-m4a": "m4a", "audio/mpeg": "mp3", "audio/aac": "aac", "audio/ogg": "ogg",
    "audio/wav": "wav", "audio/flac": "flac", "audio/webm": "weba",
    "application/vnd.apple.mpegurl": "m3u8", "application/x-mpegurl": "m3u8", "audio/mpegurl": "m3u8",
    "application/dash+xml": "mpd", "text/vtt": "vtt", "application/x-subrip": "srt",
    "image/jpeg": "jpg", "image/png": "png", "image/gif": "gif", "image/webp": "webp", "image/avif": "avif",
    "image/heic": "heic",
  ]

  /// The extension for `contentType` (parameters and case ignored), nil when unknown.
  package static func forContentType(_ contentType: String?) -> String? {
    guard let contentType else { return nil }
    let essence = contentType.split(separator: ";", maxSplits: 1).first ?? ""
    return byType[essence.trimmingCharacters(in: .whitespaces).lowercased()]
  }
}
