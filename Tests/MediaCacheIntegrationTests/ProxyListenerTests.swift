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
