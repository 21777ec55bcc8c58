import Foundation
import HTTPTypes
import MediaCache
import NIOCore

/// `GET /`: a read-only page for the proxy's operator, one self-contained HTML file (inline CSS and a small
/// script, nothing fetched from elsewhere) that polls `GET /dashboard.json` every two seconds: the cache's
/// totals, the hit ratio, cache and origin bytes served over the last minutes, the responses streaming now, and
/// the objects, most recently used first, each with a bar drawing which of its bytes are cached.
///
/// `GET /dashboard.json?offset=O&limit=L` (docs/REPORTS.md): `totals`, and one page of `objects` (at most
/// `maxLimit`). A bad `offset` or `limit` is answered `400` with the reason.
enum Dashboard {
  static let maxLimit = 200
  static let maxOffset = 1_000_000_000
  /// Cached runs drawn per object; more are merged into their neighbours.
  static let maxRanges = 64

  struct Snapshot: Encodable {
    struct Totals: Encodable {
      var objects: Int?
      var bytesOnDisk: Int64?
      var requests: Int64
      var cacheHits: Int64
      var cacheMisses: Int64
      var servedFromCache: Int64
      var servedFromOrigin: Int64
      var hitRatio: Double
      var activeResponses: Int64
      var playersWaitingForOrigin: Int
      var originErrors: Int64
    }
    struct Object: Encodable {
      var id: String
      var contentType: String?
      var length: Int64?
      var cachedBytes: Int64
      var diskBytes: Int64
      /// Cached byte ranges, `[start, end)`, at most `maxRanges`.
      var ranges: [[Int64]]
      var lastUse: Double
      var pinned: Bool
      /// The object's group (`MediaCache.remove(group:)`), left out when it has none.
      var group: String?
    }
    /// An object being fetched from the origin now.
    struct Fetch: Encodable {
      var id: String
      /// Origin requests running for it.
      var flights: Int
    }
    struct Page: Encodable {
      var offset: Int
      var limit: Int
      var total: Int
      var items: [Object]
    }
    var time: Double
    var totals: Totals
    /// The live origin fetches, by object id.
    var fetches: [Fetch]
    var objects: Page
  }

  /// Whether the request asks for the dashboard (`/` without a query, `/dashboard.json` without `?url=`: with
  /// it, `/dashboard.json` is the display name of a proxied URL, as `ProxyServer.proxyPath(for:)` makes it for
  /// an origin URL ending so that the path form cannot carry).
  static func isDashboardRequest(_ request: ProxyRequest) -> Bool {
    (request.path == "/" && request.query == nil)
      || (request.path == "/dashboard.json" && request.queryValue("url") == nil)
  }

  static func response(to request: ProxyRequest, server: ProxyServer) async throws -> ProxyResponse {
    guard request.method == .GET || request.method == .HEAD else { throw Refusal.methodNotAllowed }
    var headers = HTTPFields()
    headers[.cacheControl] = "no-store"
    let body: ByteBuffer
    if request.path == "/" {
      headers[.contentType] = "text/html; charset=utf-8"
      body = ByteBuffer(string: page)
    } else {
      let (offset, limit) = try paging(request)
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
      headers[.contentType] = "application/json"
      body = ByteBuffer(bytes: try encoder.encode(await snapshot(server, offset: offset, limit: limit)))
    }
    headers[.contentLength] = "\(body.readableBytes)"
    return ProxyResponse(status: .ok, headers: headers, body: request.method == .HEAD ? .empty : .bytes(body))
  }

  /// `offset` (default 0) and `limit` (default 50), or a 400 saying which is wrong.
  static func paging(_ request: ProxyRequest) throws -> (Int, Int) {
    func value(_ name: String, default fallback: Int, in range: ClosedRange<Int>) throws -> Int {
      guard let text = request.queryValue(name) else { return fallback }
      guard let number = Int(text), range.contains(number) else {
        throw Refusal(
          .badRequest, "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
      }
      return number
    }
    return (
      try value("offset", default: 0, in: 0...maxOffset), try value("limit", default: 50, in: 1...maxLimit)
    )
  }

  static func snapshot(_ server: ProxyServer, offset: Int, limit: Int) async throws -> Snapshot {
    let metrics = server.metrics
    await metrics.countsSettled()
    let scanned = await metrics.recentScan()
    let ordered = (scanned ?? []).sorted { ($0.lastAccess, $0.id.hex) > ($1.lastAccess, $1.id.hex) }
    let page = Array(ordered.dropFirst(offset).prefix(limit))
    let store = server.reader.cache.store
    let manifests = try await IOExecutor.shared.run {
      page.map { object in (object, try? store.readManifest(object.id)) }
    }
    let served = metrics.bytesFromCache + metrics.bytesFromOrigin
    return Snapshot(
      time: Date().timeIntervalSince1970,
      totals: .init(
        objects: scanned?.count, bytesOnDisk: scanned?.reduce(0) { $0 + $1.diskBytes },
        requests: (1...5).reduce(0) { $0 + metrics.requests(statusClass: $1) }, cacheHits: metrics.cacheHits,
        cacheMisses: metrics.cacheMisses, servedFromCache: metrics.bytesFromCache,
        servedFromOrigin: metrics.bytesFromOrigin,
        hitRatio: served == 0 ? 0 : Double(metrics.bytesFromCache) / Double(served),
        activeResponses: metrics.responsesActive,
        playersWaitingForOrigin: server.reader.playersWaitingForOrigin, originErrors: metrics.originFailures),
      fetches: server.reader.liveOriginFetches.sorted { $0.key < $1.key }.map {
        Snapshot.Fetch(id: $0.key.hex, flights: $0.value)
      },
      objects: .init(
        offset: offset, limit: limit, total: ordered.count,
        items: manifests.map { object, manifest in
          let ranges = manifest?.presentByteRanges.ranges ?? []
          return Snapshot.Object(
            id: object.id.hex, contentType: manifest?.contentType, length: manifest?.contentLength,
            cachedBytes: ranges.reduce(0) { $0 + Int64($1.count) }, diskBytes: object.diskBytes,
            ranges: drawn(ranges).map { [$0.lowerBound, $0.upperBound] }, lastUse: object.lastAccess,
            pinned: manifest?.isPinned ?? false, group: manifest?.group)
        }))
  }

  /// At most `maxRanges` runs: where there are more, the smallest gaps are closed (a bar has only so many
  /// pixels). Linear after one sort of the gaps.
  static func drawn(_ ranges: [Range<Int64>]) -> [Range<Int64>] {
    guard ranges.count > maxRanges else { return ranges }
    let gaps = (1..<ranges.count).map { ranges[$0].lowerBound - ranges[$0 - 1].upperBound }
    // Closing every gap up to this size leaves at most `maxRanges` runs.
    let threshold = gaps.sorted()[ranges.count - maxRanges - 1]
    var runs = [ranges[0]]
    for (index, gap) in gaps.enumerated() {
      let next = ranges[index + 1]
      if gap <= threshold {
        runs[runs.count - 1] = runs[runs.count - 1].lowerBound..<next.upperBound
      } else {
        runs.append(next)
      }
    }
    return runs
  }
}
