import Foundation
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The proxy's listening sockets (`ProxyListeners`): on Linux one per event loop, sharing the port with
/// `SO_REUSEPORT`, so each loop accepts its own connections; the port stays the proxy's alone, as with one.
@Suite struct ProxyListenerTests {
  #if os(Linux)
    /// The whole of a file in /proc (read until `read` returns 0: the kernel hands it over a page at a time).
    func procFile(_ path: String) -> String {
      let fd = open(path, O_RDONLY)
      guard fd >= 0 else { return "" }
      defer { close(fd) }
      var bytes: [UInt8] = []
      var page = [UInt8](repeating: 0, count: 65536)
      while true {
        let count = page.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { break }
        bytes += page[..<count]
      }
      return String(decoding: bytes, as: UTF8.self)
    }

    /// The listening TCP sockets bound to `port` (`/proc/net/tcp` and `tcp6`, state `0A`).
    func listeningSockets(port: Int) -> Int {
      var count = 0
      for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in procFile(file).split(separator: "\n").dropFirst() {
          let fields = line.split(separator: " ")
          guard fields.count > 3, fields[3] == "0A", let portField = fields[1].split(separator: ":").last,
            Int(portField, radix: 16) == port
          else { continue }
          count += 1
        }
      }
      return count
    }

    /// This process's connected TCP sockets whose local port is `port` (the connections a proxy in this process
    /// accepted there).
    func acceptedSockets(port: Int) -> [Int32] {
      (0..<Int32(4096)).filter { fd in
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafeMutablePointer(to: &address) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            guard getsockname(fd, pointer, &length) == 0, pointer.pointee.sa_family == sa_family_t(AF_INET),
              Int(UInt16(bigEndian: UnsafeRawPointer(pointer).load(as: sockaddr_in.self).sin_port)) == port
            else { return false }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            return getpeername(fd, pointer, &length) == 0
          }
        }
      }
    }

    @Test func acceptedConnectionsHaveNagleOff() async throws {
      // TCP_NODELAY comes from the listening socket (NIO sets it there; Linux copies it to accepted sockets).
      try await withReader(chunkSize: 65536, configuration: .init()) { reader, _, _ in
        let (_, endpoint, server) = try await startInProcessProxy(reader, .init(eventLoops: 2))
        defer { server.cancel() }
        let clients = try (0..<6).map { _ in try RawHTTPConnection(port: endpoint.port) }
        defer { for client in clients { client.close() } }
        var accepted: [Int32] = []
        for _ in 0..<200 where accepted.count != clients.count {
          try await Task.sleep(for: .milliseconds(10))
          accepted = acceptedSockets(port: endpoint.port)
        }
        #expect(accepted.count == clients.count)
        for fd in accepted {
          var value: Int32 = 0
          var length = socklen_t(MemoryLayout<Int32>.size)
          #expect(getsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &length) == 0)
          #expect(value == 1)
        }
      }
    }

    @Test func eachLoopListensOnTheProxysPortAndNoOtherProxyCanJoinIt() async throws {
      try await withReader(chunkSize: 65536, configuration: .init()) { reader, origin, _ in
        let (_, endpoint, server) = try await startInProcessProxy(reader, .init(eventLoops: 3))
        let port = endpoint.port
        #expect(listeningSockets(port: port) == 3)
        // New connections, spread by the kernel over the three sockets: every one answered.
        let path = ProxyServer.proxyPath(for: origin.url(.normal, "listeners", size: 100_000))
        for _ in 0..<24 {
          let response = try await blocking { try rawRequest(port: port, path) }
          #expect(response.status == 200)
          #expect(response.body == TestOrigin.bytes(name: "listeners", size: 100_000))
        }
        // Another proxy on that port does not start, with one loop or several, and takes none of its
        // connections.
        for loops in [1, 2] {
          await #expect(throws: (any Error).self) {
            _ = try await startInProcessProxy(reader, .init(port: port, eventLoops: loops))
          }
        }
        #expect(listeningSockets(port: port) == 3)
        server.cancel()
        _ = try? await server.value
        #expect(listeningSockets(port: port) == 0)
      }
    }

    @Test func aProxyDoesNotStartOnAPortAnotherServerListensOnWithOrWithoutReusePort() async throws {
      try await withReader(chunkSize: 65536, configuration: .init()) { reader, _, _ in
        for reusePort in [false, true] {
          let listener = try SilentListener(reusePort: reusePort)
          defer { listener.close() }
          let port = listener.port
          for loops in [1, 2] {
            await #expect(throws: (any Error).self, "SO_REUSEPORT \(reusePort), \(loops) loops") {
              _ = try await startInProcessProxy(reader, .init(port: port, eventLoops: loops))
            }
          }
          #expect(listeningSockets(port: port) == 1)
        }
      }
    }
  #endif
}
