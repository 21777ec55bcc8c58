import Foundation
import MediaCacheTestOrigin

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What one GET through the proxy gave.
struct ProxyGet {
  /// The status code, nil if no response head arrived (connection refused or cut: the proxy was killed).
  var status: Int?
  /// Body bytes received, every one compared with the origin's byte at its offset.
  var bodyBytes: Int64 = 0
  /// The body ended as Content-Length said.
  var complete = false
  /// The first wrong byte (object offset), if any: the one thing that must never happen.
  var wrongByteAt: Int64?
  /// A transport error (connect refused, reset, timeout) or a malformed response.
  var error: String?
}

/// The proxied path of an origin URL: `/<name>?url=<percent-encoded URL>` (see ProxyServer.proxyPath).
func proxyPath(for url: String) -> String { "/media?url=\(percentEncode(url))" }

/// GETs `range` (nil: the whole object) of `object` through the proxy on `port` with a blocking socket, checking
/// each body byte against the origin as it arrives (so bytes received before the proxy dies count too).
/// `receiveTimeout` makes a hang an error instead of a stuck driver.
func proxyGet(port: Int, _ object: OriginObject, range: Range<Int64>?, receiveTimeout: Int = 60) -> ProxyGet {
  var result = ProxyGet()
  let fd: Int32
  do {
    fd = try connectLoopback(port, timeout: receiveTimeout)
  } catch {
    result.error = error.description
    return result
  }
  defer { close(fd) }
  var request = "GET \(proxyPath(for: object.url)) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
  if let range { request += "Range: bytes=\(range.lowerBound)-\(range.upperBound - 1)\r\n" }
  request += "\r\n"
  guard sendAll(fd, Array(request.utf8)) else {
    result.error = "send: \(errnoText())"
    return result
  }

  var buffer = [UInt8](repeating: 0, count: 256 * 1024)
  var head: [UInt8] = []
  var pending: ArraySlice<UInt8> = []
  // The head: up to the blank line.
  while true {
    let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
    if got < 0 && errno == EINTR { continue }
    guard got > 0 else {
      result.error = got == 0 ? "connection closed before a response" : "recv: \(errnoText())"
      return result
    }
    head += buffer[..<got]
    if let end = headEnd(head) {
      pending = head[end...]
      head = Array(head[..<end])
      break
    }
    if head.count > 64 * 1024 {
      result.error = "response head over 64 KiB"
      return result
    }
  }
  let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
  let statusParts = lines.first?.split(separator: " ") ?? []
  guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
    result.error = "bad status line '\(lines.first ?? "")'"
    return result
  }
  result.status = status
  var headers: [String: String] = [:]
  for line in lines.dropFirst() {
    guard let colon = line.firstIndex(of: ":") else { continue }
    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
      in: .whitespaces)
  }
  guard status == 200 || status == 206 else {
    result.error = "status \(status)"
    return result
  }
  guard let lengthText = headers["content-length"], let length = Int64(lengthText) else {
    result.error = "no Content-Length"
    return result
  }
  // Where the body starts in the object: from Content-Range for a 206, else 0.
  var start: Int64 = 0
  if status == 206 {
    guard let contentRange = headers["content-range"], contentRange.hasPrefix("bytes "),
      let dash = contentRange.firstIndex(of: "-"),
      let first = Int64(contentRange[contentRange.index(contentRange.startIndex, offsetBy: 6)..<dash])
    else {
      result.error = "206 without a usable Content-Range"
      return result
    }
    start = first
  }
  let expectedStart = range?.lowerBound ?? 0
  let expectedLength =
    range.map { min($0.upperBound, Int64(object.size)) - $0.lowerBound } ?? Int64(object.size)
  if start != expectedStart || length != expectedLength {
    result.error = "answered bytes \(start)+\(length) for \(expectedStart)+\(expectedLength)"
    return result
  }
  var expected = [UInt8](repeating: 0, count: buffer.count)
  func check(_ piece: ArraySlice<UInt8>) -> Bool {
    let count = min(piece.count, Int(length - result.bodyBytes))
    guard count > 0 else { return true }
    let offset = start + result.bodyBytes
    expected.withUnsafeMutableBytes { raw in
      TestOrigin.fill(
        UnsafeMutableRawBufferPointer(rebasing: raw[..<count]), name: object.name, version: object.version,
        offset: Int(offset))
    }
    if !piece.prefix(count).elementsEqual(expected[..<count]) {
      let index = zip(piece.prefix(count), expected[..<count]).enumerated().first {
        $0.element.0 != $0.element.1
      }
      result.wrongByteAt = offset + Int64(index?.offset ?? 0)
      return false
    }
    result.bodyBytes += Int64(count)
    return true
  }
  guard check(pending) else { return result }
  while result.bodyBytes < length {
    let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
    if got < 0 && errno == EINTR { continue }
    guard got > 0 else {
      result.error = got == 0 ? "body cut at \(result.bodyBytes) of \(length)" : "recv: \(errnoText())"
      return result
    }
    guard check(buffer[..<got]) else { return result }
  }
  result.complete = true
  return result
}

private func headEnd(_ bytes: [UInt8]) -> Int? {
  guard bytes.count >= 4 else { return nil }
  for index in 0...(bytes.count - 4)
  where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
    return index + 4
  }
  return nil
}

/// A running `mediacache proxy`.
struct ProxyProcess {
  let child: Child
  let port: Int

  /// Starts the proxy on port 0 and waits (up to 60 s) for its `listening on` line.
  static func start(_ binaries: Binaries, cache: String, extra: [String] = [], log: CommandLog) throws
    -> ProxyProcess
  {
    let paths = log.paths("proxy")
    let child = try Child(
      binaries.mediacache, ["proxy", "--cache", cache, "--port", "0"] + extra, stdout: paths.out,
      stderr: paths.err
    )
    let prefix = "listening on http://127.0.0.1:"
    let deadline = monotonicSeconds() + 60
    while monotonicSeconds() < deadline {
      if let line = child.stdoutText.split(separator: "\n").first, line.hasPrefix(prefix),
        let port = Int(line.dropFirst(prefix.count))
      {
        return ProxyProcess(child: child, port: port)
      }
      if let outcome = child.poll() {
        throw TortureError("mediacache proxy ended before listening (\(outcome)): \(child.stderrText)")
      }
      usleep(5000)
    }
    child.killNow()
    throw TortureError("mediacache proxy printed no 'listening on' line in 60 s")
  }
}
