import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An origin that misbehaves at the byte level, over plain blocking sockets on 127.0.0.1 (one thread per
/// connection, one request per connection): what NIO's server would not let the normal `TestOrigin` send.
///
/// URLs are `http://127.0.0.1:PORT/<behaviour>/<name>?size=N` (see `url(_:_:size:)`). Whatever it sends of an
/// object's bytes are `TestOrigin.bytes(name:size:)`, so a cache that stored a wrong byte can be caught.
public final class HostileOrigin: Sendable {
  /// How the origin misbehaves.
  public enum Behaviour: String, Sendable, CaseIterable {
    /// Reads the request and never answers (the connection stays open until the client or `stop` closes it).
    case silent
    /// Sends a status line, then a header every `interval-ms` (default 2) with `pad` bytes of value (default
    /// 40), forever.
    case endlessHeaders = "endless-headers"
    /// Claims the object is twice its size (Content-Length of a 200, Content-Range total of a 206, ranges
    /// answered as asked up to that length), sends the real bytes up to the real size, then closes.
    case lyingLength = "lying-length"
    /// Answers with the right status, range and length, then sends 64 KiB of 0xEE more than they say (a 206
    /// framed by the connection's close; a 200 with Content-Length followed by the junk), then closes.
    case overlongBody = "overlong-body"
    /// The right bytes, but each response gives another total length (size + 1000 × request number) under the
    /// same strong ETag.
    case changingLength = "changing-length"
    /// A 206 whose Content-Range ends past its own total (`bytes a-b/(b)`).
    case rangePastTotal = "range-past-total"
    /// A 206 for a range 1000 bytes further than asked (right bytes of that range).
    case otherRange = "other-range"
    /// A 302 to the same URL.
    case selfRedirect = "self-redirect"
    /// A 302 to a second URL that redirects back to the first.
    case redirectCycle = "redirect-cycle"
  }

  /// The port it listens on, on 127.0.0.1.
  public let port: Int
  private let listener: Int32
  private let state = Mutex(State())

  private struct State {
    var stopped = false
    var connections: Set<Int32> = []
    var requests: [String: Int] = [:]
    var threads = 0
  }

  private init(listener: Int32, port: Int) {
    self.listener = listener
    self.port = port
  }

  /// Listens on a free port of 127.0.0.1 and accepts connections on a thread of its own.
  public static func start() throws -> HostileOrigin {
    #if canImport(Glibc)
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
      let fd = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard fd >= 0 else { throw HostileOriginError("socket: errno \(errno)") }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0, listen(fd, 512) == 0 else {
      let error = errno
      _ = closeSocket(fd)
      throw HostileOriginError("bind/listen: errno \(error)")
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    let origin = HostileOrigin(listener: fd, port: Int(UInt16(bigEndian: address.sin_port)))
    Thread.detachNewThread { origin.acceptLoop() }
    return origin
  }

  /// The URL of object `name` (`size` bytes) served with `behaviour`; `query` is appended (`a=1&b=2`).
  public func url(_ behaviour: Behaviour, _ name: String, size: Int, query: String? = nil) -> String {
    "http://127.0.0.1:\(port)/\(behaviour.rawValue)/\(name)?size=\(size)\(query.map { "&\($0)" } ?? "")"
  }

  /// Requests received for `name` so far.
  public func requestCount(for name: String) -> Int { state.withLock { $0.requests[name] ?? 0 } }

  /// Connections open right now.
  public var openConnections: Int { state.withLock { $0.connections.count } }

  /// Stops accepting and closes every connection (their threads end soon after).
  public func stop() {
    let open = state.withLock { state -> Set<Int32> in
      state.stopped = true
      return state.connections
    }
    _ = shutdown(listener, Int32(SHUT_RDWR))
    for fd in open { _ = shutdown(fd, Int32(SHUT_RDWR)) }
    _ = Self.closeSocket(listener)
  }

  private var isStopped: Bool { state.withLock { $0.stopped } }

  private func acceptLoop() {
    while !isStopped {
      let fd = accept(listener, nil, nil)
      if fd < 0 {
        if errno == EINTR || errno == ECONNABORTED { continue }
        return
      }
      let admitted = state.withLock { state -> Bool in
        if state.stopped { return false }
        state.connections.insert(fd)
        return true
      }
      guard admitted else {
        _ = Self.closeSocket(fd)
        return
      }
      Thread.detachNewThread { [self] in
        serve(fd)
        state.withLock { _ = $0.connections.remove(fd) }
        _ = Self.closeSocket(fd)
      }
    }
  }

  // MARK: One connection

  private struct Request {
    var behaviour: Behaviour
    var name: String
    var size: Int
    var query: [String: String]
    var path: String
    var range: (start: Int, end: Int?)?
    var hop: Bool { query["hop"] == "1" }
  }

  private func serve(_ fd: Int32) {
    var timeout = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    guard let head = readHead(fd), let request = parse(head) else {
      _ = send(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
      return
    }
    let number = state.withLock { state -> Int in
      state.requests[request.name, default: 0] += 1
      return state.requests[request.name]!
    }
    let size = request.size
    let etag = "\"\(request.name)-hostile\""
    let common = "ETag: \(etag)\r\nContent-Type: video/mp4\r\nAccept-Ranges: bytes\r\nConnection: close\r\n"
    // The range asked, clamped to the object (nil: the whole object, or an unusable range).
    var asked: Range<Int>? = nil
    if let range = request.range, range.start < size {
      asked = range.start..<min(size, (range.end.map { $0 + 1 }) ?? size)
    }
    switch request.behaviour {
    case .silent:
      waitForClose(fd)
    case .endlessHeaders:
      let interval = Int(request.query["interval-ms"] ?? "") ?? 2
      let pad = String(repeating: "x", count: Int(request.query["pad"] ?? "") ?? 40)
      guard send(fd, "HTTP/1.1 200 OK\r\n") else { return }
      var index = 0
      while !isStopped {
        guard send(fd, "X-Hostile-\(index): \(pad)\r\n") else { return }
        index += 1
        if interval > 0 { usleep(UInt32(interval * 1000)) }
      }
    case .lyingLength:
      let claimed = 2 * size
      var head = "HTTP/1.1 200 OK\r\nContent-Length: \(claimed)\r\n"
      var start = 0
      if let range = request.range, range.start < claimed {
        start = range.start
        let last = min(claimed - 1, range.end ?? claimed - 1)
        head =
          "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes \(start)-\(last)/\(claimed)\r\n"
          + "Content-Length: \(last - start + 1)\r\n"
        guard send(fd, head + common + "\r\n") else { return }
        _ = sendObject(fd, request, start..<min(size, last + 1))
        return
      }
      guard send(fd, head + common + "\r\n") else { return }
      _ = sendObject(fd, request, start..<size)
    case .overlongBody:
      // The body's end and the junk go out in one piece, so the client reads them together.
      let junk = [UInt8](repeating: 0xEE, count: 64 << 10)
      let range: Range<Int>
      if let asked, request.range != nil {
        range = asked
        let head =
          "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes \(asked.lowerBound)-\(asked.upperBound - 1)/\(size)\r\n"
        guard send(fd, head + common + "\r\n") else { return }
      } else {
        range = 0..<size
        guard send(fd, "HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n" + common + "\r\n") else { return }
      }
      let tail = max(range.lowerBound, range.upperBound - 4096)
      guard sendObject(fd, request, range.lowerBound..<tail) else { return }
      _ = sendAll(
        fd, TestOrigin.bytes(name: request.name, size: size, range: tail..<range.upperBound) + junk)
    case .changingLength:
      let total = size + 1000 * number
      let range = asked ?? 0..<size
      let head =
        request.range == nil
        ? "HTTP/1.1 200 OK\r\nContent-Length: \(total)\r\n"
        : "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)\r\n"
          + "Content-Length: \(range.count)\r\n"
      guard send(fd, head + common + "\r\n") else { return }
      _ = sendObject(fd, request, range)
    case .rangePastTotal:
      let range = asked ?? 0..<size
      let head =
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes \(range.lowerBound)-\(range.upperBound - 1)/\(range.upperBound - 1)\r\n"
        + "Content-Length: \(range.count)\r\n"
      guard send(fd, head + common + "\r\n") else { return }
      _ = sendObject(fd, request, range)
    case .otherRange:
      let asked = asked ?? 0..<size
      let shifted = min(asked.lowerBound + 1000, size - 1)..<min(asked.upperBound + 1000, size)
      let head =
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes \(shifted.lowerBound)-\(shifted.upperBound - 1)/\(size)\r\n"
        + "Content-Length: \(shifted.count)\r\n"
      guard send(fd, head + common + "\r\n") else { return }
      _ = sendObject(fd, request, shifted)
    case .selfRedirect:
      let location = "http://127.0.0.1:\(port)\(request.path)"
      _ = send(fd, "HTTP/1.1 302 Found\r\nLocation: \(location)\r\nContent-Length: 0\r\n" + common + "\r\n")
    case .redirectCycle:
      var other = url(.redirectCycle, request.name, size: size)
      if !request.hop { other += "&hop=1" }
      _ = send(fd, "HTTP/1.1 302 Found\r\nLocation: \(other)\r\nContent-Length: 0\r\n" + common + "\r\n")
    }
  }

  /// The request head (up to the blank line), or nil if the client closed first or sent more than 64 KiB.
  private func readHead(_ fd: Int32) -> String? {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while bytes.count < 64 << 10 {
      let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if count < 0 && errno == EINTR { continue }
      guard count > 0 else { return nil }
      bytes += buffer[0..<count]
      if let text = String(bytes: bytes, encoding: .isoLatin1), let end = text.range(of: "\r\n\r\n") {
        return String(text[..<end.lowerBound])
      }
    }
    return nil
  }

  private func parse(_ head: String) -> Request? {
    let lines = head.components(separatedBy: "\r\n")
    let parts = lines[0].split(separator: " ")
    guard parts.count >= 2 else { return nil }
    let path = String(parts[1])
    guard let components = URLComponents(string: path) else { return nil }
    let segments = components.path.split(separator: "/")
    guard segments.count == 2, let behaviour = Behaviour(rawValue: String(segments[0])) else { return nil }
    var query: [String: String] = [:]
    for item in components.queryItems ?? [] { query[item.name] = item.value ?? "" }
    guard let size = Int(query["size"] ?? ""), size > 0 else { return nil }
    var range: (Int, Int?)? = nil
    for line in lines.dropFirst() {
      guard let colon = line.firstIndex(of: ":"),
        line[..<colon].trimmingCharacters(in: .whitespaces).lowercased() == "range"
      else { continue }
      let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
      guard value.hasPrefix("bytes=") else { continue }
      let bounds = value.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
      if bounds.count == 2, let start = Int(bounds[0]) {
        range = (start, Int(bounds[1]))
      }
    }
    return Request(
      behaviour: behaviour, name: String(segments[1]), size: size, query: query, path: path, range: range)
  }

  private func sendObject(_ fd: Int32, _ request: Request, _ range: Range<Int>) -> Bool {
    var offset = range.lowerBound
    while offset < range.upperBound {
      let end = min(offset + (64 << 10), range.upperBound)
      guard sendAll(fd, TestOrigin.bytes(name: request.name, size: request.size, range: offset..<end))
      else {
        return false
      }
      offset = end
    }
    return true
  }

  private func waitForClose(_ fd: Int32) {
    var buffer = [UInt8](repeating: 0, count: 1024)
    while !isStopped {
      let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if count == 0 { return }
      if count < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK { return }
    }
  }

  private func send(_ fd: Int32, _ text: String) -> Bool { sendAll(fd, Array(text.utf8)) }

  private static func closeSocket(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
      Glibc.close(fd)
    #else
      Darwin.close(fd)
    #endif
  }
}

/// The hostile origin could not start (its socket calls failed).
public struct HostileOriginError: Error, CustomStringConvertible {
  /// What failed, in one line.
  public let description: String
  init(_ description: String) { self.description = description }
}

/// Sends every byte of `bytes` on the blocking socket `fd` (retrying short sends and EINTR; no SIGPIPE). Returns
/// false when the peer is gone or the send failed, with `errno` as the failing `send` left it. Shared by the
/// hostile origin, the raw-socket tests and the torture tool's clients.
public func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
  var offset = 0
  while offset < bytes.count {
    let sent = bytes.withUnsafeBytes { raw in
      #if canImport(Glibc)
        Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
      #else
        Darwin.send(fd, raw.baseAddress! + offset, raw.count - offset, 0)
      #endif
    }
    if sent < 0 && errno == EINTR { continue }
    guard sent > 0 else { return false }
    offset += sent
  }
  return true
}

/// A socket call that failed: which one, and its errno.
public struct SocketError: Error, CustomStringConvertible {
  /// The socket call that failed.
  public let call: String
  /// Its errno.
  public let errno: Int32
  /// The call and the errno's text.
  public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// A connected blocking socket to 127.0.0.1:`port`, with `timeout` seconds for each send and receive (so a hung
/// peer fails a test instead of stalling it). Shared by the raw-socket tests and the torture tool's clients.
public func connectLoopback(_ port: Int, timeout: Int = 30) throws(SocketError) -> Int32 {
  #if canImport(Glibc)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  #else
    let fd = socket(AF_INET, SOCK_STREAM, 0)
  #endif
  guard fd >= 0 else { throw SocketError(call: "socket", errno: errno) }
  var time = timeval(tv_sec: timeout, tv_usec: 0)
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
  #if canImport(Darwin)
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
  #endif
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_port = in_port_t(UInt16(port).bigEndian)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
    }
  }
  guard connected == 0 else {
    let error = SocketError(call: "connect to port \(port)", errno: errno)
    #if canImport(Glibc)
      _ = Glibc.close(fd)
    #else
      _ = Darwin.close(fd)
    #endif
    throw error
  }
  return fd
}
