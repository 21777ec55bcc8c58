import AsyncHTTPClient
import Foundation
import NIOHTTP1

// Redirects to the hosts a client may fetch from only (`OriginClient.Configuration.allowedRedirectHosts`): each
// hop is checked before its request is made, so an origin's redirect cannot send a request elsewhere.
extension OriginClient {
  /// The statuses whose `Location` AsyncHTTPClient follows (304 and 305 too), and those followed here.
  static let followedByAsyncHTTPClient: Set<UInt> = [301, 302, 303, 304, 305, 307, 308]
  static let followedHere: Set<UInt> = [301, 302, 303, 307, 308]

  /// Where a response of one of `statuses` redirects to: its `Location` resolved against `url`, when that is an
  /// http or https URL (as AsyncHTTPClient follows them); nil for anything else.
  static func redirectTarget(
    status: HTTPResponseStatus, headers: HTTPHeaders, from url: URL, statuses: Set<UInt> = followedHere
  ) -> URL? {
    guard statuses.contains(status.code), let location = headers.first(name: "location"),
      let target = URL(string: location, relativeTo: url)?.absoluteURL,
      let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https"
    else { return nil }
    return target
  }

  /// Whether a redirect to `target` may be followed: its host is one of `hosts`.
  static func mayFollow(to target: URL, hosts: Set<String>) -> Bool {
    target.host.map { hosts.contains($0.lowercased()) } ?? false
  }

  /// `request`, following its redirects here (at most `maxRedirects`, no cycle), each checked before its
  /// request is made: one to a host not in `hosts` fails with `OriginError.redirectNotAllowed`. Credentials
  /// are not sent to another origin, as AsyncHTTPClient does not send them.
  func executeCheckingRedirects(
    _ request: HTTPClientRequest, url: String, _ redirects: (hosts: Set<String>, client: HTTPClient)
  ) async throws -> HTTPClientResponse {
    var request = request
    var current = url
    var visited: Set<String> = [url]
    while true {
      let response = try await executeOnce(request, url: current, on: redirects.client)
      guard let from = URL(string: current),
        let target = Self.redirectTarget(status: response.status, headers: response.headers, from: from)
      else { return response }
      guard Self.mayFollow(to: target, hosts: redirects.hosts) else {
        throw OriginError.redirectNotAllowed(url: current, location: target.absoluteString)
      }
      guard visited.count <= configuration.maxRedirects, visited.insert(target.absoluteString).inserted else {
        throw OriginError.tooManyRedirects(url: url)
      }
      if response.status.code == 303 && request.method != .HEAD { request.method = .GET }
      if from.host?.lowercased() != target.host?.lowercased() || from.port != target.port
        || from.scheme?.lowercased() != target.scheme?.lowercased()
      {
        for name in ["Origin", "Cookie", "Authorization", "Proxy-Authorization"] {
          request.headers.remove(name: name)
        }
      }
      current = target.absoluteString
      request.url = current
    }
  }
}
