import HTTPTypes
import NIOCore
import NIOHTTP1

/// A request as its access-log line names it, with when it arrived.
struct LoggedRequest: Sendable {
  let method: HTTPMethod
  let path: Substring
  let started = NIODeadline.now()

  init(_ request: ProxyRequest) {
    method = request.method
    path = request.path
  }

  func write(to log: AccessLog, _ response: ProxyResponse, bytes: Int) {
    write(to: log, status: response.status, bytes: bytes, record: response.access)
  }

  func write(to log: AccessLog, status: HTTPResponse.Status, bytes: Int, record: AccessRecord?) {
    log.write(
      method: method, path: path, status: Int(status.code), bytes: bytes, since: started, record: record)
  }
}
