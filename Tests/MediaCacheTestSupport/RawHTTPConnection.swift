import Foundation
import MediaCacheTestOrigin

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// A tiny blocking HTTP/1.1 client over a raw socket (no URLSession, no NIO client), for the test origin and the
// proxy: what goes over the wire is exactly what the server wrote.

/// A raw HTTP exchange failed: the socket call, a timeout, or a response that cannot be parsed.
public struct RawHTTPError: Error, CustomStringConvertible {
  /// What failed, in one line.
  public let description: String
  /// An error saying `description`.
  public init(description: String) { self.description = description }
}

/// One response as read off the socket.
public struct RawHTTPResponse: Sendable {
  /// The status code.
  public var status: Int
  /// The header fields, in the order received, names as sent.
  public var headers: [(name: String, value: String)]
  /// The body (empty when the response was read with a sink).
  public var body: [UInt8]
  /// Body bytes received (payload bytes for chunked responses).
  public var bodyCount: Int
  /// The body ended as its framing said (false: the connection closed before).
  public var isComplete: Bool
  /// Whether the response used chunked transfer coding.
  public var isChunked: Bool

  /// The first value of header `name` (case-insensitive), if any.
  public func header(_ name: String) -> String? {
    headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
  }

  /// How many times header `name` (case-insensitive) was sent.
  public func headerCount(_ name: String) -> Int {
    headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.count
  }
}

/// A blocking client connection to 127.0.0.1 (30 s receive timeout, so a bug fails instead of hanging).
public final class RawHTTPConnection {
  private var fd: Int32
  private var storage = [UInt8](repeating: 0, count: 256 * 1024)
  private var start = 0
  private var end = 0
  /// Whether the server closed the connection.
  public private(set) var sawEOF = false

  /// Connects to `127.0.0.1:port`, with `timeoutSeconds` for every send and receive.
  public init(port: Int, timeoutSeconds: Int = 30) throws {
    do {
      fd = try connectLoopback(port, timeout: timeoutSeconds)
    } catch {
      throw RawHTTPError(description: error.description)
    }
  }

  deinit { close() }

  /// Closes the socket (again: nothing).
  public func close() {
    if fd >= 0 {
      #if canImport(Glibc)
        _ = Glibc.close(fd)
      #else
        _ = Darwin.close(fd)
      #endif
      fd = -1
    }
  }

  /// Sends `text` as is (a request head, exactly as a hostile or odd client would write it).
  public func send(_ text: String) throws {
    guard sendAll(fd, Array(text.utf8)) else { throw RawHTTPError(description: "send: errno \(errno)") }
  }

  /// Sends `METHOD path HTTP/1.1` with a Host header and `headers`.
  public func sendRequest(_ method: String = "GET", _ path: String, headers: [(String, String)] = []) throws {
    var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    for (name, value) in headers { text += "\(name): \(value)\r\n" }
    try send(text + "\r\n")
  }

  /// Reads more bytes into the buffer; false at end of stream (or a reset, which ends it too).
  private func readMore() throws -> Bool {
    if start == end {
      start = 0
      end = 0
    } else if end == storage.count {
      if start > 0 {
        storage.withUnsafeMutableBytes { raw in
          raw.baseAddress!.copyMemory(from: raw.baseAddress! + start, byteCount: end - start)
        }
        end -= start
        start = 0
      } else {
        storage += [UInt8](repeating: 0, count: storage.count)
      }
    }
    while true {
      let count = storage.withUnsafeMutableBytes { raw in recv(fd, raw.baseAddress! + end, raw.count - end, 0)
      }
      if count > 0 {
        end += count
        return true
      }
      if count == 0 {
        sawEOF = true
        return false
      }
      switch errno {
      case EINTR: continue
      case ECONNRESET:
        sawEOF = true
        return false
      case EAGAIN, EWOULDBLOCK: throw RawHTTPError(description: "receive timed out")
      default: throw RawHTTPError(description: "recv: errno \(errno)")
      }
    }
  }

  /// One CRLF-terminated line without the CRLF, or nil at end of stream.
  public func readLine() throws -> String? {
    while true {
      if let index = storage[start..<end].firstIndex(of: 0x0A) {
        var lineEnd = index
        if lineEnd > start && storage[lineEnd - 1] == 0x0D { lineEnd -= 1 }
        let line = String(decoding: storage[start..<lineEnd], as: UTF8.self)
        start = index + 1
        return line
      }
      guard try readMore() else { return nil }
    }
  }

  /// Passes up to `limit` body bytes (nil: until end of stream) to `sink`; returns how many it passed.
  private func readBody(limit: Int?, sink: (UnsafeRawBufferPointer) -> Void) throws -> Int {
    var total = 0
    while limit.map({ total < $0 }) ?? true {
      if start == end {
        guard try readMore() else { break }
      }
      let count = min(end - start, limit.map { $0 - total } ?? Int.max)
      storage.withUnsafeBytes { raw in sink(UnsafeRawBufferPointer(rebasing: raw[start..<start + count])) }
      start += count
      total += count
    }
    return total
  }

  /// Reads one response. The body goes to `sink` when given (then `body` stays empty), else into `body`.
  /// `method` tells whether a body follows (not after HEAD).
  public func readResponse(method: String = "GET", sink: ((UnsafeRawBufferPointer) -> Void)? = nil) throws
    -> RawHTTPResponse
  {
    guard let statusLine = try readLine() else {
      throw RawHTTPError(description: "connection closed before a response")
    }
    let parts = statusLine.split(separator: " ", maxSplits: 2)
    guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
      throw RawHTTPError(description: "bad status line '\(statusLine)'")
    }
    var headers: [(name: String, value: String)] = []
    while let line = try readLine(), !line.isEmpty {
      guard let colon = line.firstIndex(of: ":") else {
        throw RawHTTPError(description: "bad header '\(line)'")
      }
      headers.append(
        (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
    }
    var response = RawHTTPResponse(
      status: status, headers: headers, body: [], bodyCount: 0, isComplete: true, isChunked: false)
    var collected: [UInt8] = []
    try readBody(of: &response, method: method) { bytes in
      if let sink { sink(bytes) } else { collected.append(contentsOf: bytes) }
    }
    response.body = collected
    return response
  }

  private func readBody(
    of response: inout RawHTTPResponse, method: String, deliver: (UnsafeRawBufferPointer) -> Void
  ) throws {
    let status = response.status
    if method == "HEAD" || status / 100 == 1 || status == 204 || status == 304 { return }
    if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
      response.isChunked = true
      while true {
        guard let sizeLine = try readLine(),
          let size = sizeLine.split(separator: ";").first.flatMap({
            Int($0.trimmingCharacters(in: .whitespaces), radix: 16)
          })
        else {
          response.isComplete = false
          return
        }
        if size == 0 {
          while let trailer = try readLine(), !trailer.isEmpty {}
          return
        }
        let got = try readBody(limit: size, sink: deliver)
        response.bodyCount += got
        guard got == size, try readLine() == "" else {
          response.isComplete = false
          return
        }
      }
    }
    if let lengthText = response.header("Content-Length") {
      guard let length = Int(lengthText) else { throw RawHTTPError(description: "bad Content-Length") }
      response.bodyCount = try readBody(limit: length, sink: deliver)
      response.isComplete = response.bodyCount == length
      return
    }
    response.bodyCount = try readBody(limit: nil, sink: deliver)
  }

  /// Whether the server closed the connection (reads end of stream before the receive timeout).
  public func serverClosed() throws -> Bool {
    if start < end { return false }
    return !(try readMore())
  }
}

/// One request on a fresh connection.
public func rawRequest(
  _ origin: TestOrigin, _ path: String, method: String = "GET", headers: [(String, String)] = []
) throws -> RawHTTPResponse {
  let connection = try RawHTTPConnection(port: origin.port)
  defer { connection.close() }
  try connection.sendRequest(method, path, headers: headers)
  return try connection.readResponse(method: method)
}

/// One request on a fresh connection to `port`.
public func rawRequest(port: Int, _ path: String, headers: [(String, String)] = []) throws -> RawHTTPResponse
{
  let connection = try RawHTTPConnection(port: port)
  defer { connection.close() }
  try connection.sendRequest("GET", path, headers: headers)
  return try connection.readResponse()
}
