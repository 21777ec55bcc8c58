import Foundation
import MediaCacheTestOrigin

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One request a soak player makes through the proxy.
struct SoakRequest {
  /// The request target (path and query) on the proxy.
  var target: String
  /// The Range header's value (`bytes=…`), if any.
  var range: String?
  /// The test origin's object the body must equal (nil: a playlist or MPD, read whole and kept).
  var object: (name: String, size: Int)?
  /// Close the connection after this many body bytes (a player abandoning the response).
  var abandonAfter: Int64?
  /// The version to check the body against when the response has no ETag (an object `mediacache import`
  /// cached); nil: a response without an ETag is a wrong answer.
  var versionWithoutETag: Int?
}

/// How a soak request failed, for matching it with the fault that explains it.
enum SoakFailure: String, Codable, CaseIterable {
  /// No connection (refused: nothing listens).
  case connect
  /// The connection ended or broke before a whole response head.
  case noResponse = "no-response"
  /// The body ended or broke before Content-Length.
  case cut
  /// The proxy answered 5xx.
  case serverError = "server-error"
  /// No byte for the receive timeout.
  case timeout
  /// A status other than 200, 206 or 5xx, or a head that contradicts the request (Content-Range, length).
  case wrongAnswer = "wrong-answer"
}

/// What one soak request gave.
struct SoakResult {
  var status: Int?
  /// The object version the ETag named (`"<name>-v<version>"`).
  var version: Int?
  /// The response's ETag, as sent (nil: none).
  var etag: String?
  var bodyBytes: Int64 = 0
  var complete = false
  var abandoned = false
  /// The first wrong byte (object offset): the one thing that must never happen.
  var wrongByteAt: Int64?
  var failure: SoakFailure?
  var detail = ""
  var started = 0.0
  var ended = 0.0
  /// When the response head had arrived (nil: it never did).
  var headAt: Double?
  /// The body, for a request without an object (a playlist).
  var body: [UInt8] = []
}

/// The bytes `[start, start + length)` a Range value asks of an object of `size` bytes (nil: the whole object
/// as a 200).
func expectedExtent(_ range: String?, size: Int64) -> (start: Int64, length: Int64)? {
  guard let range, range.hasPrefix("bytes="), let dash = range.firstIndex(of: "-") else { return nil }
  let first = range[range.index(range.startIndex, offsetBy: 6)..<dash]
  let second = range[range.index(after: dash)...]
  if first.isEmpty {
    let suffix = min(Int64(second) ?? 0, size)
    return (size - suffix, suffix)
  }
  let start = Int64(first) ?? 0
  let end = second.isEmpty ? size - 1 : min(Int64(second) ?? 0, size - 1)
  return (start, end - start + 1)
}

/// Sends `request` to the proxy on `port` with a blocking socket and reads the answer, comparing every body
/// byte with the origin's byte at its offset in the version the response's ETag names, as it arrives.
func soakGet(port: Int, _ request: SoakRequest, receiveTimeout: Int = 30) -> SoakResult {
  let started = now()
  var result = exchange(port: port, request, receiveTimeout: receiveTimeout)
  result.started = started
  result.ended = now()
  return result
}

private func exchange(port: Int, _ request: SoakRequest, receiveTimeout: Int) -> SoakResult {
  var result = SoakResult()
  let fd: Int32
  do {
    fd = try connectLoopback(port, timeout: receiveTimeout)
  } catch {
    result.failure = .connect
    result.detail = error.description
    return result
  }
  defer { close(fd) }
  var head = "GET \(request.target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
  if let range = request.range { head += "Range: \(range)\r\n" }
  head += "\r\n"
  guard sendAll(fd, Array(head.utf8)) else {
    result.failure = .noResponse
    result.detail = "send: \(errnoText())"
    return result
  }
  var buffer = [UInt8](repeating: 0, count: 128 * 1024)
  /// One recv: the byte count, or nil with the failure recorded.
  func receive(_ failure: SoakFailure, _ what: String) -> Int? {
    while true {
      let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
      if got > 0 { return got }
      if got < 0 && errno == EINTR { continue }
      if got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
        result.failure = .timeout
        result.detail = "nothing for \(receiveTimeout) s \(what)"
      } else {
        result.failure = failure
        result.detail = got == 0 ? "closed \(what)" : "recv \(what): \(errnoText())"
      }
      return nil
    }
  }
  var received: [UInt8] = []
  var bodyStart = 0
  while true {
    guard let got = receive(.noResponse, "before the response head") else { return result }
    received += buffer[..<got]
    if let end = headEnd(received) {
      bodyStart = end
      break
    }
    if received.count > 64 * 1024 {
      result.failure = .wrongAnswer
      result.detail = "response head over 64 KiB"
      return result
    }
  }
  let lines = String(decoding: received[..<bodyStart], as: UTF8.self).components(separatedBy: "\r\n")
  let parts = lines.first?.split(separator: " ") ?? []
  guard parts.count >= 2, let status = Int(parts[1]) else {
    result.failure = .wrongAnswer
    result.detail = "bad status line '\(lines.first ?? "")'"
    return result
  }
  result.status = status
  result.headAt = now()
  var fields: [String: String] = [:]
  for line in lines.dropFirst() {
    guard let colon = line.firstIndex(of: ":") else { continue }
    fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
      in: .whitespaces)
  }
  guard status == 200 || status == 206 else {
    result.failure = status >= 500 ? .serverError : .wrongAnswer
    // The proxy's refusal is one line of text: what of it came with the head says why.
    let reason = String(decoding: received[bodyStart...].prefix(240), as: UTF8.self)
      .split(separator: "\n", maxSplits: 1).first
    result.detail = "status \(status)" + (reason.map { ": \($0)" } ?? "")
    return result
  }
  guard let lengthText = fields["content-length"], let length = Int64(lengthText) else {
    result.failure = .wrongAnswer
    result.detail = "no Content-Length"
    return result
  }
  var start: Int64 = 0
  if let object = request.object {
    if status == 206 {
      guard let contentRange = fields["content-range"], contentRange.hasPrefix("bytes "),
        let dash = contentRange.firstIndex(of: "-"),
        let first = Int64(contentRange[contentRange.index(contentRange.startIndex, offsetBy: 6)..<dash])
      else {
        result.failure = .wrongAnswer
        result.detail = "206 without a usable Content-Range"
        return result
      }
      start = first
    }
    let wanted = expectedExtent(request.range, size: Int64(object.size)) ?? (0, Int64(object.size))
    if start != wanted.start || length != wanted.length || (request.range == nil && status != 200) {
      result.failure = .wrongAnswer
      result.detail = "status \(status) bytes \(start)+\(length) for \(wanted.start)+\(wanted.length)"
      return result
    }
    let prefix = "\"\(object.name)-v"
    let etag = fields["etag"]
    let named = etag.flatMap { tag -> Int? in
      tag.hasPrefix(prefix) && tag.hasSuffix("\"") ? Int(tag.dropFirst(prefix.count).dropLast()) : nil
    }
    guard let version = etag == nil ? request.versionWithoutETag : named
    else {
      result.failure = .wrongAnswer
      result.detail = "ETag \(fields["etag"] ?? "(none)") does not name a version of \(object.name)"
      return result
    }
    result.version = version
    result.etag = etag
  }
  var expected = [UInt8](repeating: 0, count: buffer.count)
  /// Takes a received piece of the body; false when a byte is wrong.
  func take(_ piece: ArraySlice<UInt8>) -> Bool {
    let count = min(piece.count, Int(length - result.bodyBytes))
    guard count > 0 else { return true }
    guard let object = request.object, let version = result.version else {
      result.body += piece.prefix(count)
      result.bodyBytes += Int64(count)
      return true
    }
    let offset = start + result.bodyBytes
    expected.withUnsafeMutableBytes { raw in
      TestOrigin.fill(
        UnsafeMutableRawBufferPointer(rebasing: raw[..<count]), name: object.name, version: version,
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
  guard take(received[bodyStart...]) else { return result }
  while result.bodyBytes < length {
    if let limit = request.abandonAfter, result.bodyBytes >= limit {
      result.abandoned = true
      return result
    }
    guard let got = receive(.cut, "at body byte \(result.bodyBytes) of \(length)") else { return result }
    guard take(buffer[..<got]) else { return result }
  }
  result.complete = true
  return result
}
