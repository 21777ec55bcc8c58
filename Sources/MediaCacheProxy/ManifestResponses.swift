import Foundation
import HTTPTypes
import MediaCache
import MediaCacheHTTP
import MediaCacheStreaming
import Synchronization

// The responses of HLS playlists and DASH MPDs: read whole (bounded), rewritten so what they name goes through
// the proxy, answered from memory.
extension ProxyResponder {
  // MARK: HLS and DASH

  /// Whether the response must be read whole to find out: an HLS playlist or MPD content type, or a
  /// `.m3u8`/`.m3u`/`.mpd` path (whose body decides, see `respondWithPlaylist`).
  static func mayBePlaylist(contentType: String?, url: String) -> Bool {
    // Given the playlist header as the body's prefix, `isPlaylist` answers "a playlist type, or a .m3u8/.m3u
    // path" with one parse of the URL (this runs for every response).
    HLSPlaylist.isPlaylist(contentType: contentType, url: url, prefix: HLSPlaylist.header.utf8)
      || MPDRewriter.mayBeManifest(contentType: contentType, url: url)
  }

  /// Reads the whole playlist or MPD (bounded), rewrites its URIs to proxied ones and answers from memory. A
  /// body that turns out to be neither is served as it is.
  ///
  /// Requested in path form, only what would not resolve to a proxied URL is rewritten (absolute URIs,
  /// see `ProxyPathForm.rewrittenReference`); in query form, every HLS URI is rewritten, and an MPD gets a
  /// path-form top-level `BaseURL` (see `MPDRewriter.RequestForm.queryForm`). In the reverse-proxy mode an
  /// HLS URI whose target lies under an upstream is rewritten to its local path unless it is a relative path
  /// without `..` (which resolves there as written), other targets are written absolute; an MPD's
  /// references likewise (`MPDRewriter.RequestForm.reverseProxy`). `use` is how the request's
  /// first read found the cache and `revalidation` what it did about a stale copy, which its `Cache-Status`
  /// says. The origin's stored end-to-end fields go out as with any cached response (`headers(...)`), with the
  /// copy's `Age`. `earlier`, that first read (closed), says what was at hand before the request, for the
  /// counts of bytes from the cache and the origin.
  func respondWithPlaylist(
    _ origin: String, isPathForm: Bool, rangeHeader: RangeHeader, isHead: Bool, use: CacheUse,
    revalidation: Revalidation = .notNeeded, after earlier: CachedBytes? = nil
  ) async throws -> ProxyResponse {
    let bytes = try await read(origin, .all, after: earlier)
    defer { bytes.close() }
    if let length = bytes.length, length > HLSPlaylist.maxPlaylistBytes {
      throw Refusal(
        .badGateway, "\(origin): playlist or MPD of \(length) bytes is larger than the proxy accepts")
    }
    var body = Data()
    do {
      for try await piece in bytes {
        body.append(piece)
        if body.count > HLSPlaylist.maxPlaylistBytes {
          throw Refusal(.badGateway, "\(origin): playlist or MPD is larger than the proxy accepts")
        }
      }
    } catch let refusal as Refusal {
      throw refusal
    } catch {
      throw refusal(for: error, url: origin)
    }
    metrics.noteServed(fromCache: bytes.bytesFromCache, fromOrigin: bytes.bytesFromOrigin)
    // A player asking for any of a playlist gets the whole rewritten one to use: all of it was played.
    if !isHead { metrics.noteServed(bytes.objectID, 0..<Int64(body.count)) }
    metrics.noteRequest(hit: bytes.bytesFromOrigin == 0)
    var etag = bytes.etag
    if let rewritten = try rewrittenPlaylist(
      body, origin: origin, base: bytes.responseURL, contentType: bytes.contentType, isPathForm: isPathForm)
    {
      body = rewritten.body
      etag = nil  // the rewritten text is not the origin's representation
      await noteLive(rewritten.isLive, origin, bytes)
    }
    return Self.respondFromMemory(
      body, rangeHeader: rangeHeader, isHead: isHead,
      headers: Self.headers(
        contentType: bytes.contentType, etag: etag, lastModified: bytes.lastModified,
        stored: bytes.storedHeaders, freshness: bytes.freshness,
        cacheStatus: cacheStatus(use, revalidation, bytes.freshness), via: via))
  }

  /// `body` rewritten for the player (see `respondWithPlaylist`), and whether it is live; nil for a body that is
  /// neither a playlist nor an MPD (served as it is). Throws a `Refusal` (502) for one that cannot be rewritten.
  ///
  /// Relative references resolve against `base`, the URL a redirect led to (nil: `origin`), as a player that
  /// followed the redirect itself resolves them. The player's own URL is `origin`'s, so where the two differ
  /// no reference is kept relative: each is resolved and written as a proxy URL (an MPD as in the query form;
  /// in the reverse-proxy mode an MPD's relative references are still kept, a limit the README states).
  func rewrittenPlaylist(
    _ body: Data, origin: String, base: String? = nil, contentType: String?, isPathForm: Bool
  ) throws -> (body: Data, isLive: Bool)? {
    let redirected = base.map { $0 != origin } ?? false
    let base = base ?? origin
    if HLSPlaylist.isPlaylist(contentType: contentType, url: origin, prefix: body.prefix(16)),
      let text = String(data: body, encoding: .utf8), let playlistURL = URL(string: base)
    {
      do {
        let upstreams = server.upstreamMap
        let rewritten = try HLSPlaylist.rewrite(
          text, playlistURL: playlistURL,
          keeping: { reference in
            // In the reverse-proxy mode a relative path without dot segments resolves through the request's
            // path to the local path of its target, as it does in path form.
            guard !redirected, upstreams == nil || !reference.contains("..") else { return false }
            return (isPathForm || upstreams != nil) && ProxyPathForm.keepsReference(reference, base: origin)
          }
        ) { target in
          if let upstreams {
            // A target under an upstream goes through the proxy; any other is left to the player.
            return upstreams.localPath(for: target) ?? target.absoluteString
          }
          return ProxyServer.proxyPath(for: target.absoluteString)
        }
        return (Data(rewritten.utf8), text.contains("#EXTINF") && !text.contains("#EXT-X-ENDLIST"))
      } catch  where error.code == .notAPlaylist {
        // An HLS type on a body without `#EXTM3U`: a plain M3U (a radio's `listen.m3u`, served as
        // `audio/mpegurl`), a list of URLs a player reads as it is. Served as it is.
        return nil
      } catch {
        throw Refusal(.badGateway, "\(origin): \(error)")
      }
    }
    guard MPDRewriter.mayBeManifest(contentType: contentType, url: origin) else { return nil }
    do {
      let form: MPDRewriter.RequestForm
      if let upstreams = server.upstreamMap {
        form = .reverseProxy(localPath: { URL(string: $0).flatMap(upstreams.localPath(for:)) })
      } else {
        form = isPathForm && !redirected ? .pathForm : .queryForm
      }
      let rewritten = try MPDRewriter.rewrite(body, manifestURL: base, form: form)
      return (rewritten.body, rewritten.isDynamic)
    } catch  where error.code == .notAnMPD && !MPDRewriter.hasManifestContentType(contentType) {
      // A .mpd path whose body is not an MPD: served as it is.
      return nil
    } catch {
      throw Refusal(.badGateway, error.description)
    }
  }

  /// A live playlist or MPD changes: the next request must see the origin's new version. It is dropped from
  /// the cache now, and remembered so it is dropped before the next read too (the drop now is skipped while
  /// the object is still open, for example by the flight that fetched it).
  private func noteLive(_ isLive: Bool, _ origin: String, _ bytes: CachedBytes) async {
    live.set(origin, isLive: isLive)
    guard isLive else { return }
    bytes.close()
    _ = try? await reader.cache.remove(origin)
  }
}

/// The origin URLs of live playlists and MPDs the proxy has served lately (bounded: when full, it starts
/// over, which costs at worst one stale answer per live URL).
final class LiveManifests: Sendable {
  private static let limit = 4096
  private let urls = Mutex<Set<String>>([])

  func contains(_ url: String) -> Bool { urls.withLock { $0.contains(url) } }

  func set(_ url: String, isLive: Bool) {
    urls.withLock { urls in
      if isLive {
        if urls.count >= Self.limit { urls.removeAll() }
        urls.insert(url)
      } else {
        urls.remove(url)
      }
    }
  }
}
