import AsyncHTTPClient
import Foundation
import NIOHTTP1

extension BodyWriter {
  /// Refuses a redirect to a host the client may not fetch from (`OriginClient.Configuration
  /// .allowedRedirectHosts`) before AsyncHTTPClient follows it. AsyncHTTPClient calls this for every response
  /// head, on the task's event loop, before it decides to redirect; the task failed here is finished, so the
  /// redirect's request is never made.
  func didVisitURL(task: HTTPClient.Task<Void>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
    guard let allowed = session.environment.client.configuration.allowedRedirectHosts,
      (300..<400).contains(head.status.code), let location = head.headers.first(name: "location"),
      let target = URL(string: location, relativeTo: request.url)?.absoluteURL
    else { return }
    if let host = target.host?.lowercased(), allowed.contains(host) { return }
    task.fail(
      reason: OriginError.redirectNotAllowed(url: request.url.absoluteString, location: target.absoluteString)
    )
  }
}
