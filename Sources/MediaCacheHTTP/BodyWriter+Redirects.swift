import AsyncHTTPClient
import Foundation
import NIOHTTP1

extension BodyWriter {
  /// Refuses a redirect to a host the client may not fetch from (`OriginClient.Configuration
  /// .allowedRedirectHosts`) before AsyncHTTPClient follows it. AsyncHTTPClient calls this for every response
  /// head, on the task's event loop, before it decides to redirect; the task failed here is finished, so the
  /// redirect's request is never made.
  ///
  /// Also notes the URL of each response head (the last is the final response's: `responseURL`).
  func didVisitURL(task: HTTPClient.Task<Void>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
    responseURL = request.url.absoluteString
    guard let hosts = session.environment.client.redirects?.hosts,
      let target = OriginClient.redirectTarget(
        status: head.status, headers: head.headers, from: request.url,
        statuses: OriginClient.followedByAsyncHTTPClient),
      !OriginClient.mayFollow(to: target, hosts: hosts)
    else { return }
    task.fail(
      reason: OriginError.redirectNotAllowed(url: request.url.absoluteString, location: target.absoluteString)
    )
  }
}
