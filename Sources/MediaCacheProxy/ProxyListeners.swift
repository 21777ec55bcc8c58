import NIOCore
import NIOPosix

#if canImport(Glibc)
  import Glibc
#endif

/// The proxy's listening sockets. On Linux with more than one event loop: one per loop, all bound to the
/// address with `SO_REUSEPORT`, each accepting on its loop the connections that loop serves (the kernel hands
/// each new connection to one of them, by a hash of its addresses). Elsewhere, and with one loop: one socket.
///
/// With one listening socket for several loops, NIO's `ServerBootstrap` accepts on the socket's loop and
/// hands every connection for another loop over to it: three wake-ups across threads before the connection's
/// first request is read, ~0.05 ms of a new connection's time to first byte on the 2-core host
/// (docs/PERFORMANCE.md, "Each loop accepting its own connections").
///
/// Binding stays exclusive, as with one socket: before a fixed port is shared among the loops' sockets, the
/// address is bound once without `SO_REUSEPORT` (and closed), so anything listening there, a proxy or not,
/// makes `bind` fail with `EADDRINUSE` as before. What this leaves open: a process that sets `SO_REUSEPORT`
/// itself, as the same user, binding the port between that check and the loops' binds (microseconds). Port 0
/// is bound by the first loop's socket and the others join the port the kernel gave it (Linux gives an
/// automatic port only where no socket is bound).
struct ProxyListeners {
  /// The listening channels, one per loop sharing the port, or one.
  let channels: [any Channel]

  /// The port bound (nil if the channel has no local address).
  var port: Int? { channels.first?.localAddress?.port }

  /// Binds `host:port` for the loops of `group`, each bootstrap set up by `configure` (options and the child
  /// initializer). Throws what NIO's `bind` throws (nothing is left bound then).
  static func bind(
    host: String, port: Int, group: MultiThreadedEventLoopGroup,
    configure: (ServerBootstrap) -> ServerBootstrap
  ) async throws -> ProxyListeners {
    let loops = Array(group.makeIterator())
    #if os(Linux)
      if loops.count > 1 {
        return try await bindSharedPort(host: host, port: port, loops: loops, configure: configure)
      }
    #endif
    let channel = try await configure(ServerBootstrap(group: group))
      .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
      .bind(host: host, port: port).get()
    return ProxyListeners(channels: [channel])
  }

  /// Closes every listening channel (the connections they accepted stay open).
  func close() async {
    for channel in channels { try? await channel.close() }
  }

  #if os(Linux)
    private static func bindSharedPort(
      host: String, port: Int, loops: [any EventLoop], configure: (ServerBootstrap) -> ServerBootstrap
    ) async throws -> ProxyListeners {
      if port != 0 {
        // Fails, as one listening socket would, when anything listens on the address.
        let probe = try await ServerBootstrap(group: loops[0])
          .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
          .bind(host: host, port: port).get()
        try await probe.close()
      }
      var channels: [any Channel] = []
      do {
        for loop in loops {
          let boundPort = channels.first?.localAddress?.port ?? port
          channels.append(
            try await configure(ServerBootstrap(group: loop, childGroup: loop))
              .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
              .serverChannelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
              .bind(host: host, port: boundPort).get())
        }
      } catch {
        await ProxyListeners(channels: channels).close()
        throw error
      }
      return ProxyListeners(channels: channels)
    }
  #endif
}
