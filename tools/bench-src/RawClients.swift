// Plain-socket HTTP/1.1 clients for two rows of `tools/bench`: many players starting at once (`fanout`), and
// one player's scripted cold play with seeks (`play-script`). Each client is a blocking socket on its own
// thread, so 32 of them start together without a curl process each skewing the start, and each is timed from
// connect to its first body byte.
//
//   mediacache-bench fanout --urls FILE --size BYTES
//       One client per line of FILE (http://127.0.0.1:PORT/PATH), all started at the same instant; each sends
//       a GET (Connection: close), times connect -> first body byte, and reads its whole body, which must be
//       BYTES long with status 200. Prints each client's time to first byte and one summary line:
//       "fanout: clients N, ttfb ms p50 X p99 Y max Z, seconds S".
//   mediacache-bench play-script --url URL --size BYTES [--first K] [--probe M] [--chunk C]
//       What a player does with an MP4 whose moov is at the end, cold: `bytes=0-` read K bytes (default
//       300000) and close; `bytes=-10240` read it; `bytes=48-` read M bytes (default 3 MiB) and close;
//       seek to the middle, read 1 MiB, then keep reading from there to the end. Prints the ranges consumed
//       and "play-script: needed N bytes in R ranges, W bytes in whole chunks of C" (the size of their union,
//       and of the C-byte chunks it touches: the floor for a cache that fetches whole chunks; default 1 MiB).

import ArgumentParser
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Host, port and path of an `http://` URL on an IPv4 literal (the bench only talks to loopback servers).
struct RawTarget: Sendable {
  var host: String
  var port: UInt16
  var path: String

  init(_ url: String) throws {
    guard let components = URLComponents(string: url), components.scheme == "http",
      let host = components.host, !host.isEmpty
    else { throw BenchError("not an http:// URL with a host: '\(url)'") }
    let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
    self.host = host
    self.port = UInt16(components.port ?? 80)
    self.path = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
  }
}

/// What one GET saw: its status, when the first body byte came (seconds after the connect started), and how
/// many body bytes the client consumed before it closed.
struct RawResponse: Sendable {
  var status: Int
  var firstByteSeconds: Double
  var bodyBytes: Int64
  var contentRange: String?
}

/// One GET over a fresh connection (Connection: close). Reads the body until `limit` bytes (then closes the
/// connection: the player abandons the request), the Content-Length, or the end of the connection.
func rawGet(_ target: RawTarget, range: String? = nil, limit: Int64 = .max) throws -> RawResponse {
  let clock = ContinuousClock()
  let start = clock.now
  let fd = try connectedSocket(target)
  defer { close(fd) }
  // A stuck server fails the case instead of hanging the suite.
  var timeout = timeval(tv_sec: 120, tv_usec: 0)
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
  var request = "GET \(target.path) HTTP/1.1\r\nHost: \(target.host):\(target.port)\r\nConnection: close\r\n"
  if let range { request += "Range: \(range)\r\n" }
  request += "\r\n"
  let requestBytes = Array(request.utf8)
  var sent = 0
  while sent < requestBytes.count {
    let count = requestBytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    guard count > 0 else { throw BenchError("send to \(target.path): \(errnoText())") }
    sent += count
  }

  var buffer = [UInt8](repeating: 0, count: 256 << 10)
  var header: [UInt8] = []
  var response: RawResponse?
  var contentLength: Int64?
  var received: Int64 = 0
  while received < limit, received < contentLength ?? .max {
    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    if count < 0 && errno == EINTR { continue }
    guard count >= 0 else { throw BenchError("receive from \(target.path): \(errnoText())") }
    if count == 0 { break }
    var bodyStart = 0
    if response == nil {
      header += buffer[..<count]
      guard let end = headerEnd(header) else {
        guard header.count < 65536 else { throw BenchError("\(target.path): response head over 64 KiB") }
        continue
      }
      let parsed = try parseHead(header[..<end], path: target.path)
      response = RawResponse(
        status: parsed.status, firstByteSeconds: .nan, bodyBytes: 0,
        contentRange: parsed.fields["content-range"])
      if parsed.fields["transfer-encoding"] != nil {
        throw BenchError("\(target.path): chunked response bodies are not supported by this client")
      }
      contentLength = parsed.fields["content-length"].flatMap { Int64($0) }
      bodyStart = count - (header.count - end)
    }
    let bodyCount = Int64(count - bodyStart)
    if bodyCount > 0 && response!.firstByteSeconds.isNaN {
      response!.firstByteSeconds = seconds(clock.now - start)
    }
    received += bodyCount
  }
  guard var response else { throw BenchError("\(target.path): the connection closed before a response head") }
  response.bodyBytes = min(received, limit)
  if limit == .max, let contentLength, received < contentLength {
    throw BenchError("\(target.path): body ended after \(received) of \(contentLength) bytes")
  }
  return response
}

/// A socket connected to `target`, its receive buffer set to `receiveBuffer` bytes first if given (before the
/// connect, so that the window it offers is that small).
func connectedSocket(_ target: RawTarget, receiveBuffer: Int32? = nil) throws -> Int32 {
  let fd = try tcpSocket()
  if var size = receiveBuffer {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
  }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_port = target.port.bigEndian
  guard inet_pton(AF_INET, target.host, &address.sin_addr) == 1 else {
    close(fd)
    throw BenchError("not an IPv4 address: '\(target.host)'")
  }
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
    }
  }
  guard connected == 0 else {
    close(fd)
    throw BenchError("connect to \(target.host):\(target.port): \(errnoText())")
  }
  return fd
}

/// The index just past the blank line that ends a response head, if it has arrived.
private func headerEnd(_ bytes: [UInt8]) -> Int? {
  guard bytes.count >= 4 else { return nil }
  for index in 3..<bytes.count
  where bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
    return index + 1
  }
  return nil
}

/// The status code and the header fields (names lower-cased) of a response head.
private func parseHead(_ bytes: ArraySlice<UInt8>, path: String) throws -> (
  status: Int, fields: [String: String]
) {
  let lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
  let statusParts = lines[0].split(separator: " ")
  guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
    throw BenchError("\(path): not an HTTP/1.x status line: '\(lines[0])'")
  }
  var fields: [String: String] = [:]
  for line in lines.dropFirst() {
    guard let colon = line.firstIndex(of: ":") else { continue }
    fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
      in: .whitespaces)
  }
  return (status, fields)
}

/// Results written by client threads, read once they have all finished.
private final class ResultBox: @unchecked Sendable {
  private let lock = NSLock()
  private var results: [Int: Result<RawResponse, any Error>] = [:]

  func set(_ index: Int, _ result: Result<RawResponse, any Error>) {
    lock.lock()
    results[index] = result
    lock.unlock()
  }

  func all() -> [Int: Result<RawResponse, any Error>] {
    lock.lock()
    defer { lock.unlock() }
    return results
  }
}

/// The nearest-rank percentile `p` (0...100) of `values`.
func percentile(_ values: [Double], _ p: Double) -> Double {
  let sorted = values.sorted()
  guard !sorted.isEmpty else { return .nan }
  let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
  return sorted[min(max(rank, 1), sorted.count) - 1]
}

/// `fanout`: every URL of the file fetched at once, one thread each.
struct FanoutCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "fanout",
    abstract: "Fetch every URL of FILE at once, one plain-socket client per thread.",
    discussion: """
      Prints each client's time to first byte and their p50/p99 (tools/bench-src/RawClients.swift).
      """)

  @Option var urls: String
  @Option var size: Positive = 1

  func run() throws {
    let path = urls
    let size = Int64(self.size.value)
    let text = try String(contentsOfFile: path, encoding: .utf8)
    let targets = try text.split(separator: "\n").map { try RawTarget(String($0)) }
    guard !targets.isEmpty else { throw BenchError("\(path) lists no URL") }
    let box = ResultBox()
    let done = DispatchGroup()
    // Every thread waits for the same instant, so the requests leave together rather than in spawn order.
    let startAt = DispatchTime.now() + .milliseconds(200)
    let clock = ContinuousClock()
    let begun = clock.now
    for (index, target) in targets.enumerated() {
      done.enter()
      let thread = Thread {
        let wait = Int64(startAt.uptimeNanoseconds) - Int64(DispatchTime.now().uptimeNanoseconds)
        if wait > 0 { usleep(useconds_t(wait / 1000)) }
        box.set(index, Result { try rawGet(target) })
        done.leave()
      }
      thread.stackSize = 1 << 20
      thread.start()
    }
    done.wait()
    let elapsed = seconds(clock.now - begun) - 0.2
    var ttfb: [Double] = []
    for (index, result) in box.all().sorted(by: { $0.key < $1.key }) {
      let response = try result.get()
      guard response.status == 200, response.bodyBytes == size else {
        throw BenchError(
          "client \(index) (\(targets[index].path)): status \(response.status), \(response.bodyBytes) bytes"
            + " (expected 200 and \(size))")
      }
      ttfb.append(response.firstByteSeconds * 1000)
    }
    print("ttfb ms by client: " + ttfb.map { fixed($0, 1) }.joined(separator: " "))
    print(
      "fanout: clients \(ttfb.count), ttfb ms p50 \(fixed(percentile(ttfb, 50), 3)) p99"
        + " \(fixed(percentile(ttfb, 99), 3)) max \(fixed(ttfb.max() ?? .nan, 3)), seconds \(fixed(elapsed, 2))"
    )
  }
}

/// `play-script`: the requests of a cold play with seeks; prints the size of the union of the ranges consumed.
struct PlayScriptCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "play-script",
    abstract:
      "A player's cold play of an MP4 with its moov at the end (start, tail, probe, seek, play to the end).",
    discussion: """
      Prints the bytes it consumed (the union of its ranges) and the whole C-byte chunks those touch.
      """)

  @Option var url: String
  @Option var size: Positive = 1
  @Option var first: Positive = 300000
  @Option var probe: Positive = Positive(3 << 20)
  @Option var chunk: Positive = Positive(1 << 20)

  func run() throws {
    let target = try RawTarget(url)
    let size = Int64(self.size.value)
    let first = Int64(self.first.value)
    let probe = Int64(self.probe.value)
    let chunk = Int64(self.chunk.value)
    let tail: Int64 = 10240
    let middle = size / 2
    guard size > middle + (1 << 20), probe + 48 < middle, tail < size - middle - (1 << 20) else {
      throw BenchError("--size \(size) is too small for this script (--probe \(probe))")
    }
    // (range header, expected first offset, bytes to consume)
    let steps: [(String, Int64, Int64)] = [
      ("bytes=0-", 0, first),
      ("bytes=-\(tail)", size - tail, tail),
      ("bytes=48-", 48, probe),
      ("bytes=\(middle)-", middle, 1 << 20),
      ("bytes=\(middle + (1 << 20))-", middle + (1 << 20), size - middle - (1 << 20)),
    ]
    var consumed: [Range<Int64>] = []
    for (range, offset, count) in steps {
      let response = try rawGet(target, range: range, limit: count)
      let expected = "bytes \(offset)-\(size - 1)/\(size)"
      guard response.status == 206, response.contentRange == expected, response.bodyBytes == count else {
        throw BenchError(
          "\(range): status \(response.status), Content-Range \(response.contentRange ?? "none"), "
            + "\(response.bodyBytes) bytes read (expected 206, \(expected), \(count) bytes)")
      }
      consumed.append(offset..<(offset + count))
      print(
        "\(range): consumed \(offset)..<\(offset + count), first byte after"
          + " \(fixed(response.firstByteSeconds * 1000, 1)) ms")
    }
    // The union: sorted, overlapping or touching ranges merged.
    var union: [Range<Int64>] = []
    for range in consumed.sorted(by: { $0.lowerBound < $1.lowerBound }) {
      if let last = union.last, range.lowerBound <= last.upperBound {
        union[union.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
      } else {
        union.append(range)
      }
    }
    let needed = union.reduce(Int64(0)) { $0 + Int64($1.count) }
    // The least a cache that stores whole chunks of `chunk` bytes must fetch: the chunks the union touches.
    var chunks = Set<Int64>()
    for range in union { chunks.formUnion((range.lowerBound / chunk)...((range.upperBound - 1) / chunk)) }
    let whole = chunks.reduce(Int64(0)) { $0 + min(chunk, size - $1 * chunk) }
    print(
      "play-script: needed \(needed) bytes in \(union.count) ranges, \(whole) bytes in whole chunks of \(chunk)"
    )
  }
}
