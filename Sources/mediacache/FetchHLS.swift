import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheStreaming
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension FetchCommand {
  /// `fetch --hls`: the playlist (and, for a master, the chosen variant's playlist), then every URI of the
  /// media playlist in fetch order (see `prefetchAll`), with one progress display.
  func fetchHLS() async throws {
    try await withReader { try await fetchHLS(reader: $0) }
  }

  func fetchHLS(reader: CachingReader) async throws {
    guard let playlistURL = URL(string: url) else { throw OriginError.invalidURL(url) }
    var playlists = [url]
    var mediaURL = playlistURL
    let media: HLSPlaylist.MediaPlaylist
    // The chosen variant's audio and subtitle renditions (`EXT-X-MEDIA` with a URI): a player needs them too.
    var renditions: [HLSPlaylist.MediaPlaylist] = []
    switch try await Self.readPlaylist(url, reader: reader) {
    case .media(let list):
      if variant != nil {
        throw fail("--variant applies to a master playlist; \(url) is a media playlist", .usage)
      }
      media = list
    case .master(let variants):
      let index = try chooseVariant(variants)
      let chosen = variants[index]
      printOut("variant \(index) of \(variants.count): \(Self.describe(chosen))")
      mediaURL = chosen.uri
      playlists.append(chosen.uri.absoluteString)
      guard case .media(let list) = try await Self.readPlaylist(chosen.uri.absoluteString, reader: reader)
      else {
        throw fail(
          "variant playlist \(chosen.uri.absoluteString) is a master playlist, not a media playlist", .failure
        )
      }
      media = list
      for rendition in chosen.audioRenditions + chosen.subtitleRenditions {
        printOut("rendition: \(rendition.absoluteString)")
        playlists.append(rendition.absoluteString)
        guard case .media(let list) = try await Self.readPlaylist(rendition.absoluteString, reader: reader)
        else {
          throw fail(
            "rendition playlist \(rendition.absoluteString) is a master playlist, not a media playlist",
            .failure)
        }
        renditions.append(list)
      }
    }
    var uris = media.allURIs.map(\.absoluteString)
    var seen = Set(uris)
    for uri in renditions.flatMap(\.allURIs).map(\.absoluteString) where seen.insert(uri).inserted {
      uris.append(uri)
    }
    let prerequisites = ([media] + renditions).flatMap { $0.keys + $0.maps }.map(\.absoluteString)
    let final = try await joiningGroup(playlists + uris, cache: reader.cache) {
      let final = try await Self.prefetchShowingProgress(
        uris, prerequisites: Set(prerequisites), reader: reader)
      // Everything the player needs is on disk, or the exit status says what is not.
      try await Self.requireComplete(playlists + uris, reader: reader)
      return final
    }
    let all = [media] + renditions
    let segments = Set(all.flatMap(\.segments)).count
    let keys = all.reduce(0) { $0 + $1.keys.count }
    let maps = all.reduce(0) { $0 + $1.maps.count }
    let with = renditions.isEmpty ? "" : " with \(Self.count(renditions.count, "rendition"))"
    printOut(
      "cached HLS \(mediaURL.absoluteString)\(with): \(Self.count(uris.count, "file")) "
        + "(\(Self.count(segments, "segment")), \(Self.count(keys, "key")), \(Self.count(maps, "init section"))), "
        + "\(final.cachedBytes) bytes; fetched \(final.fetchedBytes) bytes from the origin")
  }

  /// `1 file`, `2 files`.
  static func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }

  /// The variant `--variant` names, else the one with the highest BANDWIDTH (the first of equals).
  func chooseVariant(_ variants: [HLSPlaylist.Variant]) throws -> Int {
    guard !variants.isEmpty else { throw fail("\(url): the master playlist lists no variants", .failure) }
    if let variant {
      guard variants.indices.contains(variant) else {
        let list = variants.enumerated().map { "  \($0.offset): \(Self.describe($0.element))" }
        throw fail(
          "--variant \(variant) is out of range; \(url) has \(Self.count(variants.count, "variant")):\n"
            + list.joined(separator: "\n"), .usage)
      }
      return variant
    }
    var best = 0
    for (index, candidate) in variants.enumerated()
    where (candidate.bandwidth ?? -1) > (variants[best].bandwidth ?? -1) {
      best = index
    }
    return best
  }

  static func describe(_ variant: HLSPlaylist.Variant) -> String {
    var fields: [String] = []
    if let bandwidth = variant.bandwidth { fields.append("BANDWIDTH=\(bandwidth)") }
    if let resolution = variant.resolution { fields.append("RESOLUTION=\(resolution)") }
    if let codecs = variant.codecs { fields.append("CODECS=\(codecs)") }
    fields.append(variant.uri.absoluteString)
    return fields.joined(separator: " ")
  }

  /// Reads a whole playlist through the cache (so it is cached too) and parses it. Refuses more than
  /// `HLSPlaylist.maxPlaylistBytes` without reading past them.
  static func readPlaylist(_ url: String, reader: CachingReader) async throws -> HLSPlaylist.Playlist {
    let limit = HLSPlaylist.maxPlaylistBytes
    let (body, playlistURL) = try await readWhole(url, limit: limit, reader: reader) {
      HLSError.tooLarge(url: url, bytes: $0, limit: limit)
    }
    guard let text = String(data: body, encoding: .utf8) else {
      throw fail("\(url) is not an HLS playlist: it is not UTF-8 text", .failure)
    }
    return try HLSPlaylist.parse(text, playlistURL: playlistURL)
  }

  /// `prefetchAll` with its progress on standard error (a bar on a terminal, a line a second otherwise);
  /// returns the final snapshot.
}
