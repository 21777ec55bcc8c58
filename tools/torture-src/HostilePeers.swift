import Foundation
import MediaCache
import MediaCacheTestOrigin
import MediaCacheTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Hostile origins and hostile clients against one `mediacache proxy`: each round one misbehaving origin
/// (`HostileOrigin`, a random behaviour) and one misbehaving client (malformed or enormous Range headers,
/// thousands of ranges, an enormous header or URL, a flood of idle and byte-by-byte connections) while a normal
/// client reads a random range of a normal object. Every request must end within its bound, no wrong byte may
/// reach a client, the normal read must be complete and exact, the proxy must stay alive with its memory under
/// a bound, and afterwards no listed chunk may differ from the origin and `cache-fsck -n` must be clean.
func hostilePeersTrial(_ context: TrialContext, _ environment: Environment) {
  var random = SeededRandom(seed: context.seed)
  let log = CommandLog(directory: context.directory)
  let root = "\(context.directory)/cache"
  let checks = Checks(context: context, binaries: environment.binaries, log: log, root: root)
  let hostile: HostileOrigin
  do { hostile = try HostileOrigin.start() } catch { return context.fail("hostile origin: \(error)") }
  defer { hostile.stop() }
  let proxy: ProxyProcess
  do {
    proxy = try ProxyProcess.start(
      environment.binaries, cache: root,
      extra: [
        "--durability", "relaxed", "--retries", "1", "--connect-timeout", "2", "--idle-timeout", "1",
        "--head-timeout", "2", "--client-timeout", "2",
      ], log: log)
  } catch {
    return context.fail("proxy: \(error)")
  }
  var normals: [OriginObject] = []
  var hostiles: [OriginObject] = []
  var wholeReads: Set<String> = []
  let warm = OriginObject(
    name: "hp-warm", size: 200_000, url: environment.origin.url(.normal, "hp-warm", size: 200_000))
  _ = proxyGet(port: proxy.port, warm, range: nil)
  let baseline = residentBytes(pid: proxy.child.pid) ?? 0
  var peak = baseline
  let rounds = 3
  for round in 0..<rounds {
    let behaviour = HostileOrigin.Behaviour.allCases.randomElement(using: &random)!
    let name = "hp-\(context.trial)-\(round)-\(random.token())"
    let size = Int.random(in: 100_000...1_500_000, using: &random)
    let query = behaviour == .endlessHeaders ? "interval-ms=\(Int.random(in: 0...10, using: &random))" : nil
    let bad = OriginObject(
      name: name, size: size, url: hostile.url(behaviour, name, size: size, query: query))
    hostiles.append(bad)
    let badRange: String? =
      Bool.random(using: &random) ? "bytes=0-\(Int.random(in: 0..<size, using: &random))" : nil
    // A lying length is found out only by a read past the real end: only whole reads must not record it.
    if badRange == nil { wholeReads.insert(name) }
    let normalName = "hp-n-\(context.trial)-\(round)-\(random.token())"
    let normalSize = Int.random(in: 100_000...2_000_000, using: &random)
    let normal = OriginObject(
      name: normalName, size: normalSize, url: environment.origin.url(.normal, normalName, size: normalSize))
    normals.append(normal)
    let abuse = ClientAbuse.allCases.randomElement(using: &random)!
    let abuseSeed = random.next()
    context.tally.count("origin \(behaviour.rawValue)")
    context.tally.count("client \(abuse.rawValue)")
    let when = "round \(round) (origin \(behaviour.rawValue), client \(abuse.rawValue))"

    let group = DispatchGroup()
    DispatchQueue.global().async(group: group) {
      let started = monotonicSeconds()
      var request = "GET \(proxyPath(for: bad.url)) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
      if let badRange { request += "Range: \(badRange)\r\n" }
      let exchange = rawExchange(port: proxy.port, Array((request + "\r\n").utf8), timeout: 20)
      let seconds = monotonicSeconds() - started
      context.tally.fault()
      if exchange.timedOut || seconds > 20 {
        return context.fail("\(when): the hostile origin's request took \(Int(seconds)) s")
      }
      switch exchange.status {
      case 502, 504: context.tally.count("hostile origin answered \(exchange.status!)")
      case 200, 206:
        // The head went out before the origin misbehaved: whatever body came must be the real bytes.
        let body = exchange.body
        if body.count > size || body != bad.bytes(0..<Int64(body.count)) {
          context.fail(
            "\(when): wrong bytes from the hostile origin reached the client (\(body.count) bytes)")
        }
        context.tally.verified(Int64(body.count))
        context.tally.count("hostile origin cut after the head")
      default:
        context.fail("\(when): status \(exchange.status.map(String.init) ?? "none") for the hostile origin")
      }
    }
    DispatchQueue.global().async(group: group) {
      abuse.run(port: proxy.port, normal: normal, seed: abuseSeed, context: context, when: when)
    }
    // The normal client, meanwhile.
    let range: Range<Int64>? =
      Bool.random(using: &random)
      ? nil
      : {
        let start = Int64.random(in: 0..<Int64(normalSize), using: &random)
        return start..<min(Int64(normalSize), start + Int64.random(in: 1...1_000_000, using: &random))
      }()
    let started = monotonicSeconds()
    let result = proxyGet(port: proxy.port, normal, range: range, receiveTimeout: 30)
    context.tally.verified(result.bodyBytes)
    if !result.complete || result.wrongByteAt != nil || monotonicSeconds() - started > 30 {
      context.fail("\(when): the normal read of \(normal.name) \(String(describing: range)): \(result)")
    }
    group.wait()
    if let rss = residentBytes(pid: proxy.child.pid) { peak = max(peak, rss) }
    if let outcome = proxy.child.poll() {
      return context.fail("\(when): the proxy ended: \(outcome) \(proxy.child.stderrText)")
    }
  }
  context.tally.count("RSS growth MiB summed over trials", Int64(max(0, peak - baseline) >> 20))
  if peak - baseline > 128 << 20 {
    context.fail("the proxy's RSS grew \((peak - baseline) >> 20) MiB")
  }
  // Still serving: a normal object whole, byte for byte.
  let last = proxyGet(port: proxy.port, normals[0], range: nil)
  context.tally.verified(last.bodyBytes)
  if !last.complete || last.wrongByteAt != nil { context.fail("after the rounds: \(last)") }
  proxy.child.signal(SIGTERM)
  let outcome = proxy.child.wait(timeout: 30)
  if outcome != .exited(0) {
    context.fail("the proxy ended \(outcome) after SIGTERM: \(proxy.child.stderrText)")
  }
  var audits = checks.auditAll(
    normals + hostiles.filter { wholeReads.contains($0.name) }, when: "after the rounds")
  // An object read only within its real bytes may keep the origin's lying length (nothing yet contradicted
  // it); every chunk it lists must still be right.
  for object in hostiles where !wholeReads.contains(object.name) {
    let audit = auditObject(root: root, object)
    for problem in audit.problems where !problem.contains("manifest length") {
      context.fail("after the rounds: \(problem)")
    }
    context.tally.verified(audit.bytesVerified)
    audits[object.name] = audit
  }
  for object in hostiles where wholeReads.contains(object.name) {
    if let length = audits[object.name]?.manifest?.contentLength, length != Int64(object.size) {
      context.fail("the lying length \(length) of \(object.name) (\(object.size) bytes) was recorded")
    }
  }
  checks.fsckCheck(allowed: [], requireClean: true, when: "after the rounds")
}

/// What a hostile client does in a round.
enum ClientAbuse: String, CaseIterable {
  case malformedRange = "malformed-range"
  case manyRanges = "many-ranges"
  case enormousHeader = "enormous-header"
  case enormousURL = "enormous-url"
  case connectionFlood = "connection-flood"

  static let malformed = [
    "garbage", "bytes=abc", "bytes=-", "bytes=--5", "bytes=5-1", "bytes 0-5", "items=0-5",
    "bytes=99999999999999999999-", "bytes=0-99999999999999999999", "bytes=-99999999999999999999", "bytes=,,,",
    "bytes=9223372036854775807-9223372036854775807", "bytes=0-1,2-3", "bytes=\u{1}\u{2}",
  ]

  func run(port: Int, normal: OriginObject, seed: UInt64, context: TrialContext, when: String) {
    var random = SeededRandom(seed: seed)
    let path = proxyPath(for: normal.url)
    let base = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    switch self {
    case .malformedRange, .manyRanges:
      let header =
        self == .malformedRange
        ? Self.malformed.randomElement(using: &random)!
        : "bytes="
          + (0..<Int.random(in: 2...8000, using: &random)).map { "\($0 * 3)-\($0 * 3 + 1)" }.joined(
            separator: ",")
      let exchange = rawExchange(port: port, Array((base + "Range: \(header)\r\n\r\n").utf8), timeout: 30)
      context.tally.fault()
      // Ignored (or several ranges): 200 with the whole body. A value with control characters is not a valid
      // field value, and one past NIO's 80 KiB field limit is not read: 400 for both.
      let invalid = header.utf8.contains { $0 < 0x20 } || header.utf8.count > 80 * 1024 - 16
      if invalid && exchange.status == 400 {
        context.tally.count("client refused 400")
      } else if exchange.status != 200 || exchange.body != normal.bytes(0..<Int64(normal.size)) {
        context.fail(
          "\(when): Range \(header.prefix(40)) (\(header.utf8.count) bytes): status \(exchange.status.map(String.init) ?? "none"), \(exchange.body.count) body bytes"
        )
      } else {
        context.tally.verified(Int64(exchange.body.count))
      }
    case .enormousHeader, .enormousURL:
      let count = Int.random(in: (100 << 10)...(1 << 20), using: &random)
      let request =
        self == .enormousHeader
        ? base + "X-Big: \(String(repeating: "b", count: count))\r\n\r\n"
        : "GET \(path)%26pad%3D\(String(repeating: "p", count: count)) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
      let exchange = rawExchange(port: port, Array(request.utf8), timeout: 30)
      context.tally.fault()
      if exchange.timedOut || !(exchange.status == nil || [400, 431].contains(exchange.status!)) {
        context.fail(
          "\(when): a \(count)-byte head: \(exchange.timedOut ? "no answer in 30 s" : "status \(exchange.status!)")"
        )
      }
    case .connectionFlood:
      // 100 connections that send nothing and 5 that send a head byte by byte, for about 1.5 s.
      var idle: [Int32] = []
      for _ in 0..<100 { if let fd = try? connectLoopback(port) { idle.append(fd) } }
      let slow = (0..<5).compactMap { _ in try? connectLoopback(port) }
      let text = Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
      for index in 0..<15 {
        for fd in slow { _ = send(fd, [text[index % text.count]], 1, Int32(MSG_NOSIGNAL)) }
        usleep(100_000)
      }
      context.tally.fault(idle.count + slow.count)
      for fd in idle + slow { close(fd) }
    }
  }
}

/// One request on a fresh connection, read until the peer closes (or `timeout` seconds of silence): the status
/// (nil if no head came) and the body (the bytes after the head, framing not interpreted: ask with
/// `Connection: close`).
func rawExchange(port: Int, _ request: [UInt8], timeout: Int) -> (status: Int?, body: [UInt8], timedOut: Bool)
{
  guard let fd = try? connectLoopback(port, timeout: timeout) else { return (nil, [], false) }
  defer { close(fd) }
  // A failed send is no error here: the proxy closes on a head it refuses; read what it said.
  _ = sendAll(fd, request)
  var received: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 64 << 10)
  var timedOut = false
  while true {
    let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
    if got < 0 && errno == EINTR { continue }
    if got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { timedOut = true }
    if got <= 0 { break }
    received += buffer[..<got]
  }
  guard let end = findHeadEnd(received) else { return (nil, [], timedOut) }
  let statusLine = String(decoding: received[..<end], as: UTF8.self).split(separator: "\r\n").first ?? ""
  let parts = statusLine.split(separator: " ")
  let status = parts.count >= 2 ? Int(parts[1]) : nil
  return (status, Array(received[end...]), timedOut)
}

private func findHeadEnd(_ bytes: [UInt8]) -> Int? {
  guard bytes.count >= 4 else { return nil }
  for index in 0...(bytes.count - 4)
  where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
    return index + 4
  }
  return nil
}
