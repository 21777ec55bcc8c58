import Foundation
import HTTPTypes
import MediaCacheHTTP
import NIOCore

/// `PUT /preload` and `GET /preload`: a feed app (or anything on the proxy's host) tells the proxy which items
/// come next, and the proxy's `Preloader` keeps their first seconds cached.
///
/// `PUT /preload` takes JSON `{"items": [URL, ...], "current": I, "seconds": [5, 2, 2]}`: the feed's items in
/// order (origin URLs, or proxy request targets such as `/https/cdn.example.com/a.mp4`), the index of the one
/// being played (-1: none yet), and optionally the seconds to preload by distance (replacing the default 5, 2,
/// 2). At most `maxItems` items and `maxTargets` targets of 0 to `maxSeconds` seconds; a body of at most
/// `ProxyRequest.maxBodyBytes`. Every URL is checked as a proxied URL is (http or https, an allowed host).
/// Answered `204`, or `400`/`403`/`413` with the reason. `GET /preload` answers the window as JSON.
enum PreloadEndpoint {
  static let maxItems = 1000
  static let maxTargets = 16
  static let maxSeconds = 600.0

  /// What `PUT /preload` takes.
  struct Update: Decodable {
    var items: [String]
    var current: Int
    var seconds: [Double]?
  }

  /// What `GET /preload` answers: each item of the window, nearest first.
  struct Report: Encodable {
    struct Item: Encodable {
      var url: String
      var distance: Int
      /// Seconds of media to preload, or nil for a target in bytes.
      var seconds: Double?
      /// Bytes to preload, for a target in bytes.
      var bytes: Int64?
      /// `waiting`, `planning`, `fetching`, `done`, `overBudget` or `failed`.
      var state: String
      /// Why it failed.
      var error: String?
      var plannedBytes: Int64?
      var fetchedBytes: Int64
      /// Seconds known to be cached (a target in seconds fetched whole), nil for a target in bytes.
      var cachedSeconds: Double?
    }
    var items: [Item]
  }

  /// Whether the request is for the endpoint (`/preload` without `?url=`: with it, `/preload` is the display
  /// name of a proxied URL).
  static func isPreloadRequest(_ request: ProxyRequest) -> Bool {
    request.path == "/preload" && request.queryValue("url") == nil
  }

  static func report(_ status: [Preloader.ItemStatus]) -> Report {
    Report(
      items: status.map { item in
        var seconds: Double?
        var bytes: Int64?
        switch item.target {
        case .seconds(let value): seconds = value
        case .bytes(let value): bytes = value
        }
        var error: String?
        let state: String
        switch item.state {
        case .waiting: state = "waiting"
        case .planning: state = "planning"
        case .fetching: state = "fetching"
        case .done: state = "done"
        case .overBudget: state = "overBudget"
        case .failed(let reason):
          state = "failed"
          error = reason
        }
        return Report.Item(
          url: item.url, distance: item.distance, seconds: seconds, bytes: bytes, state: state, error: error,
          plannedBytes: item.plannedBytes, fetchedBytes: item.fetchedBytes, cachedSeconds: item.cachedSeconds)
      })
  }
}

extension ProxyResponder {
  /// Answers `PUT /preload` and `GET /preload` (see `PreloadEndpoint`).
  func preloadResponse(_ request: ProxyRequest) async throws -> ProxyResponse {
    switch request.method {
    case .GET, .HEAD:
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys]
      let json = try encoder.encode(PreloadEndpoint.report(await server.preloader.status()))
      var headers = HTTPFields()
      headers[.contentType] = "application/json"
      headers[.contentLength] = "\(json.count)"
      return ProxyResponse(
        status: .ok, headers: headers,
        body: request.method == .HEAD ? .empty : .bytes(ByteBuffer(bytes: json)))
    case .PUT:
      if request.bodyTooLarge {
        throw Refusal(.contentTooLarge, "the body is larger than \(ProxyRequest.maxBodyBytes) bytes")
      }
      let update: PreloadEndpoint.Update
      do {
        let body = Data(request.body.readableBytesView)
        update = try JSONDecoder().decode(PreloadEndpoint.Update.self, from: body)
      } catch {
        throw Refusal(
          .badRequest,
          "the body is not {\"items\": [URL, ...], \"current\": N, \"seconds\": [S, ...]}: \(error)")
      }
      guard update.items.count <= PreloadEndpoint.maxItems else {
        throw Refusal(.badRequest, "\(update.items.count) items; at most \(PreloadEndpoint.maxItems)")
      }
      guard update.current == -1 || update.items.indices.contains(update.current) else {
        throw Refusal(.badRequest, "current is \(update.current); it must be -1 or an index of items")
      }
      if let seconds = update.seconds {
        guard seconds.count <= PreloadEndpoint.maxTargets,
          seconds.allSatisfy({ $0.isFinite && (0...PreloadEndpoint.maxSeconds).contains($0) })
        else {
          throw Refusal(
            .badRequest,
            "seconds must be at most \(PreloadEndpoint.maxTargets) numbers from 0 to \(Int(PreloadEndpoint.maxSeconds))"
          )
        }
      }
      var origins: [String] = []
      for (index, item) in update.items.enumerated() {
        let origin = item.hasPrefix("/") ? originURL(ofTarget: item) : item
        do {
          origins.append(try checkedOriginURL(origin))
        } catch let refusal as Refusal {
          throw Refusal(refusal.status, "items[\(index)]: \(refusal.reason)")
        }
      }
      await server.preloader.update(
        items: origins, current: update.current, targets: update.seconds.map { $0.map { .seconds($0) } })
      return ProxyResponse(status: .noContent, headers: HTTPFields(), body: .empty)
    default:
      var refusal = Refusal(.methodNotAllowed, "/preload takes GET, HEAD and PUT")
      refusal.headers[.allow] = "GET, HEAD, PUT"
      throw refusal
    }
  }
}
