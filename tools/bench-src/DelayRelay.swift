// `delay-relay`: a TCP relay on loopback that holds every new connection for a fixed time before it connects to
// the upstream and copies bytes both ways. Put in front of the throttled origin of the fan-out row, it gives
// each origin request the first-byte latency of a real network (loopback has none), so that row's ratio
// compares waiting on the origin rather than a few milliseconds of local overhead.
//
//   mediacache-bench delay-relay --upstream PORT --delay-ms MS [--rate-kib K]
//       with --rate-kib, each connection's bytes from the upstream are paced to K KiB/s (16 KiB pieces);
//       prints "listening on http://127.0.0.1:PORT", relays to 127.0.0.1:UPSTREAM until killed

import ArgumentParser
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A new TCP socket (IPv4).
func tcpSocket() throws -> Int32 {
  #if os(Linux)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  #else
    let fd = socket(AF_INET, SOCK_STREAM, 0)
  #endif
  guard fd >= 0 else { throw BenchError("socket: \(errnoText())") }
  return fd
}

private func loopback(_ port: UInt16) -> sockaddr_in {
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_port = port.bigEndian
  address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
  return address
}

/// Copies from `source` to `target` until the end of `source` or an error, then ends `target`'s writing side.
/// With a `rate` (bytes per second), at most that many bytes per second, in pieces of at most 16 KiB, evenly
/// spaced: a paced link, where nginx's `limit_rate` sends each second's allowance in one burst.
private func pump(_ source: Int32, _ target: Int32, rate: Int = 0) {
  var buffer = [UInt8](repeating: 0, count: rate > 0 ? 16 << 10 : 64 << 10)
  let start = DispatchTime.now().uptimeNanoseconds
  var total = 0
  copying: while true {
    if rate > 0 {
      let due = start + UInt64(Double(total) / Double(rate) * 1e9)
      let now = DispatchTime.now().uptimeNanoseconds
      if due > now { usleep(useconds_t((due - now) / 1000)) }
    }
    let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
    total += max(count, 0)
    if count < 0 && errno == EINTR { continue }
    if count <= 0 { break }
    var sent = 0
    while sent < count {
      let written = buffer[sent..<count].withUnsafeBytes {
        send(target, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      if written < 0 && errno == EINTR { continue }
      if written <= 0 { break copying }
      sent += written
    }
  }
  shutdown(target, Int32(SHUT_WR))
}

/// One relayed connection: the delay, the upstream connection, then bytes both ways (one thread each).
private func relay(_ client: Int32, upstream: UInt16, delay: Int, rate: Int) {
  usleep(useconds_t(delay * 1000))
  guard let server = try? tcpSocket() else {
    close(client)
    return
  }
  var address = loopback(upstream)
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
    }
  }
  guard connected == 0 else {
    close(server)
    close(client)
    return
  }
  let done = DispatchSemaphore(value: 0)
  Thread {
    pump(server, client, rate: rate)
    done.signal()
  }.start()
  pump(client, server)
  done.wait()
  close(server)
  close(client)
}

struct DelayRelayCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "delay-relay",
    abstract:
      "A loopback TCP relay to 127.0.0.1:PORT that holds each new connection MS ms (default 50) first.",
    discussion: """
      The first-byte latency of a real origin (tools/bench-src/DelayRelay.swift).
      """)

  @Option var upstream: UInt16
  @Option var delayMs: Positive = 50
  @Option var rateKib: Positive?

  func run() throws {
    let upstream = self.upstream
    let delay = delayMs.value
    // Bytes per second from the upstream, per connection; 0: as fast as they come.
    let paced = rateKib != nil
    let rate = paced ? (rateKib?.value ?? 1) * 1024 : 0
    let listener = try tcpSocket()
    var one: Int32 = 1
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var address = loopback(0)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0, listen(listener, 512) == 0 else { throw BenchError("bind/listen: \(errnoText())") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
    }
    let line = "listening on http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))\n"
    FileHandle.standardOutput.write(Data(line.utf8))
    while true {
      let client = accept(listener, nil, nil)
      guard client >= 0 else {
        if errno == EINTR || errno == ECONNABORTED { continue }
        throw BenchError("accept: \(errnoText())")
      }
      let thread = Thread { relay(client, upstream: upstream, delay: delay, rate: rate) }
      thread.stackSize = 1 << 20
      thread.start()
    }
  }
}
