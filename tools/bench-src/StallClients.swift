// Clients that stop reading, for a row of `tools/bench serve`: what a server holds for players that paused, or
// whose process is starved of CPU, and whether it gives that memory back once they are gone.
//
//   mediacache-bench stall --url URL --clients N --pid PID [--seconds S] [--after A]
//       Opens N connections (each asking for a 64 KiB receive buffer, which Linux doubles), sends each a GET
//       of URL and reads nothing for
//       S seconds (default 5), sampling the server's resident size (/proc/PID/status) every 100 ms; then closes
//       them all and waits A seconds (default 12). Prints one line:
//       "stall: clients N, RSS before X MiB, peak Y MiB while stalled, Z MiB A s after they left".

import ArgumentParser
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

struct StallCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "stall", abstract: "A server's resident size while clients do not read, and after they left."
  )

  @Option(help: "The URL every client asks for (http://127.0.0.1:PORT/PATH).") var url: String
  @Option(help: "Clients that stop reading.") var clients = 256
  @Option(help: "The server's process id (its /proc/PID/status is sampled).") var pid: Int32
  @Option(help: "Seconds the clients hold their connections without reading.") var seconds = 5.0
  @Option(help: "Seconds waited after they closed before the last sample.") var after = 12.0

  func run() throws {
    let target = try RawTarget(url)
    let before = try residentMiB(pid)
    var sockets: [Int32] = []
    defer { for fd in sockets { close(fd) } }
    for _ in 0..<clients { sockets.append(try stalledGet(target)) }
    var peak = before
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
      peak = max(peak, try residentMiB(pid))
      usleep(100_000)
    }
    for fd in sockets { close(fd) }
    sockets = []
    Thread.sleep(forTimeInterval: after)
    let left = try residentMiB(pid)
    print(
      String(
        format:
          "stall: clients %d, RSS before %.1f MiB, peak %.1f MiB while stalled, %.1f MiB %.0f s after they left",
        clients, before, peak, left, after))
  }
}

/// A connection with a small receive buffer that has sent a GET of `target` and will read nothing.
private func stalledGet(_ target: RawTarget) throws -> Int32 {
  // A small receive buffer, set before the connect: the server's bytes wait on its side.
  let fd = try connectedSocket(target, receiveBuffer: 64 << 10)
  let request = Array("GET \(target.path) HTTP/1.1\r\nHost: \(target.host):\(target.port)\r\n\r\n".utf8)
  let sent = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
  guard sent == request.count else {
    close(fd)
    throw BenchError("send to \(target.path): \(errnoText())")
  }
  return fd
}

/// `VmRSS` of process `pid`, MiB.
private func residentMiB(_ pid: Int32) throws -> Double {
  let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
  guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
    let kib = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
  else { throw BenchError("no VmRSS in /proc/\(pid)/status") }
  return kib / 1024
}
