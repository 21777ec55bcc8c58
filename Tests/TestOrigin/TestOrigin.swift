import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A real HTTP/1.1 origin on 127.0.0.1 for tests and benchmarks: it serves deterministic objects of any
/// size in several behaviours ("modes", the first path segment) and records every request.
///
/// `GET /<mode>/<name>?size=N` serves object `name`, whose N bytes are `TestOrigin.bytes(name:size:version:)`
/// at the object's current version (see `setVersion(name:to:)`). See `Mode` for what each mode does.
/// `GET /files/<relative path>` serves a real file under the directory given to `start(host:port:fileRoot:)`
/// (see `Mode.files` and `url(file:)`).
///
/// In every mode but `files`, `auth=TOKEN` answers 401 unless the request has `Authorization: Bearer TOKEN`,
/// `cache-control=VALUE` (percent-encoded) adds that `Cache-Control` to the response, and each
/// `header=NAME:VALUE` (percent-encoded) that field (see also `setHeaders(name:_:)`); `status=N` answers N with
/// a one-line text body (none for 204 and 304) and those fields (with `delay-ms=M`: 64 object bytes in two
/// pieces, M ms after each).
///
/// All work happens on SwiftNIO event loops (no Swift tasks), so tests that block threads of the
/// cooperative pool (a blocking socket client, waiting for a child process) cannot starve the origin.
public final class TestOrigin: Sendable {
  /// The behaviours, selected by the first path segment.
  public enum Mode: String, Sendable, CaseIterable {
    /// Range (`bytes=a-b`, `bytes=a-`, `bytes=-n`; one range, otherwise the header is ignored) answered
    /// 206 with `Content-Range: bytes a-b/N`; unsatisfiable ranges 416 with `Content-Range: bytes */N`;
    /// `If-Range` that does not match the current ETag (strong comparison) or Last-Modified (exact) gives
    /// 200 with the full body; `If-None-Match` / `If-Modified-Since` matching the current validator gives
    /// 304; HEAD answers the GET headers (Range is ignored for HEAD) without a body.
    case normal
    /// Ignores Range and If-Range: always 200 with the full body; `Accept-Ranges: none`.
    case norange
    /// Like `normal` but `Transfer-Encoding: chunked` and no Content-Length: 200 full body, 206 with
    /// `Content-Range: bytes a-b/*`, 416 without Content-Range.
    case chunked
    /// Like `normal` but no ETag: Last-Modified is the only validator (an ETag in If-Range never matches).
    case lastmod
    /// Like `normal` (same status, Content-Length, Content-Range) but sends only the first half of the
    /// body (`length / 2` bytes), then closes the connection.
    case truncated
    /// A request with a Range is answered 206 with a different range of the same length, shifted 1000 bytes
    /// forward (backward when that passes the end), and the bytes of that range, so Content-Range and body
    /// agree with each other but not with the request. Without Range: like `normal`.
    case wrongrange
    /// The first `failures` (`?failures=N`, default 2) requests for each object name are answered 500, then
    /// the mode behaves like `normal`. See `resetFlakyCounters()`.
    case flaky
    /// Like `normal` but the body goes out in 16 KiB pieces with a delay (`?delay-ms=N`, default 20) after
    /// each piece; with `?burst=B`, the first B bytes go out without a delay.
    case slow
    /// 302 to the `normal` URL of the same object (absolute `Location`), or with `?hops=N` a chain of N
    /// redirects (`redirect` with hops N-1, ..., then `normal`); `host=NAME` names the origin by another host
    /// name in the `Location`. Other query items are kept. With `?to=PATH`, one 302 to this origin's PATH
    /// (for example `/files/hls/index.m3u8`).
    case redirect
    /// Ignores Range and Accept-Encoding: 200 with `Content-Encoding: gzip` and a real gzip stream of the
    /// object bytes (deflate stored blocks; `TestOrigin.gzipBody`), `Accept-Ranges: none`.
    case gzip
    /// `/files/<relative path>` (see `url(file:)`): the file at that path under the origin's file root
    /// (`start(host:port:fileRoot:)`), with exactly the `normal` mode's semantics. ETag and Last-Modified
    /// come from the file's size and modification time; Content-Type from its extension (`.mp4`
    /// video/mp4, `.m3u8` application/vnd.apple.mpegurl, `.m3u` audio/x-mpegurl, `.ts` video/mp2t, `.m4s` video/iso.segment, any
    /// other application/octet-stream). The path is percent-decoded once; 404 when there is no file root,
    /// no such regular file, or the path is empty, absolute, has an empty, `.` or `..` segment, or leads
    /// (through symlinks too) out of the root. The query is ignored, as are `setVersion` and `setSize`.
    /// Requests are recorded with `name` = the decoded relative path. The file is read in 64 KiB pieces
    /// as the client takes them, never whole.
    case files
  }

  /// The host the origin listens on.
  public let host: String
  /// The port the origin listens on.
  public let port: Int

  private let serverChannel: any Channel
  let state: OriginState

  private init(host: String, port: Int, serverChannel: any Channel, state: OriginState) {
    self.host = host
    self.port = port
    self.serverChannel = serverChannel
    self.state = state
  }

  deinit {
    serverChannel.close(promise: nil)
  }

  /// Starts an origin listening on `host:port` (port 0: any free port). `fileRoot` is the directory the
  /// `files` mode serves (nil: every `/files/` request is answered 404); throws
  /// `TestOriginError.badFileRoot` when it is not a directory.
  public static func start(host: String = "127.0.0.1", port: Int = 0, fileRoot: String? = nil) async throws
    -> TestOrigin
  {
    var canonicalRoot: String?
    if let fileRoot {
      guard let root = FilePaths.canonicalDirectory(fileRoot) else {
        throw TestOriginError.badFileRoot(fileRoot)
      }
      canonicalRoot = root
    }
    let state = OriginState(fileRoot: canonicalRoot)
    let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .serverChannelOption(.backlog, value: 256)
      .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
      .childChannelOption(.socketOption(.so_reuseaddr), value: 1)
      .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          var encoder = HTTPResponseEncoder.Configuration()
          // The origin frames every response itself (Content-Length or Transfer-Encoding: chunked).
          encoder.automaticallySetFramingHeaders = false
          try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: false, withEncoderConfiguration: encoder)
          let connectionID = state.addConnection(channel)
          try channel.pipeline.syncOperations.addHandler(
            OriginConnectionHandler(state: state, connectionID: connectionID))
        }
      }
    let channel = try await bootstrap.bind(host: host, port: port).get()
    guard let boundPort = channel.localAddress?.port else {
      try? await channel.close().get()
      throw TestOriginError.noLocalAddress
    }
    return TestOrigin(host: host, port: boundPort, serverChannel: channel, state: state)
  }

  /// Stops listening and closes every open connection (a response in progress is recorded as a client
  /// disconnect). Calling it again does nothing.
  public func shutdown() async throws {
    do {
      try await serverChannel.close().get()
    } catch ChannelError.alreadyClosed {
    }
    for channel in state.openConnections() {
      do {
        try await channel.close().get()
      } catch ChannelError.alreadyClosed {
      }
    }
  }

  /// `http://127.0.0.1:PORT`.
  public var baseURL: String {
    host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)"
  }

  /// The path (with query) of object `name` in `mode`: `/<mode>/<name>?size=N[&query]`.
  public static func path(_ mode: Mode, _ name: String, size: Int, query: String? = nil) -> String {
    var path = "/\(mode.rawValue)/\(name)?size=\(size)"
    if let query, !query.isEmpty { path += "&\(query)" }
    return path
  }

  /// The absolute URL of object `name` in `mode`: `baseURL + path(mode, name, size:, query:)`.
  public func url(_ mode: Mode, _ name: String, size: Int, query: String? = nil) -> String {
    baseURL + Self.path(mode, name, size: size, query: query)
  }

  // MARK: Objects

  /// Changes the current version of object `name` (default 0): its bytes, ETag and Last-Modified.
  public func setVersion(name: String, to version: Int) { state.setVersion(name: name, to: version) }

  /// The current version of object `name`.
  public func version(of name: String) -> Int { state.version(of: name) }

  /// Makes object `name` `size` bytes long whatever `?size=` says (nil: use `?size=` again), so one URL can
  /// change length.
  public func setSize(name: String, to size: Int?) { state.setSize(name: name, to: size) }

  /// Forgets how many requests each name got in `flaky` mode, so the next ones fail again.
  public func resetFlakyCounters() { state.resetFlakyCounters() }

  /// Header fields added to every answer for object `name` from now on (304s and errors included), after the
  /// query's `cache-control` and `header` ones (empty: none): a test changes what the origin says about an
  /// object between requests.
  public func setHeaders(name: String, _ fields: [(String, String)]) { state.setHeaders(name: name, fields) }

  // MARK: Faults

  /// A misbehaviour the origin applies to every `normal`-mode request while it is set (a schedule of them is
  /// how `tools/soak` makes the origin flap under load). Requests already being answered are not changed.
  public enum Fault: Sendable, Equatable, CustomStringConvertible {
    /// 503 with a short text body.
    case serverErrors
    /// The status, Content-Length and Content-Range of the request, half of the body, then the connection
    /// closed (as `truncated`).
    case cutBodies
    /// The body in 16 KiB pieces with `delayMilliseconds` after each (as `slow`).
    case slowBodies(delayMilliseconds: Int)
    /// The connection closed once the request is read, with no response (recorded with status 0).
    case connectionResets
    /// A 302 to the same target on host `toHost` (the port the same).
    case redirects(toHost: String)

    /// `server-errors`, `cut-bodies`, `slow-bodies` or `connection-resets`.
    public var description: String {
      switch self {
      case .serverErrors: "server-errors"
      case .cutBodies: "cut-bodies"
      case .slowBodies: "slow-bodies"
      case .connectionResets: "connection-resets"
      case .redirects(let host): "redirects to \(host)"
      }
    }
  }

  /// Sets (or with nil ends) the fault applied to `normal`-mode requests from now on.
  public func setFault(_ fault: Fault?) { state.setFault(fault) }

  /// The fault applied now, if any.
  public var fault: Fault? { state.fault }

  // MARK: Records

  /// Every request recorded since the start or the last `resetRecords()`, in arrival order.
  public func allRequests() -> [RecordedRequest] { state.records { _ in true } }

  /// The recorded requests for object `name` (any mode), in arrival order. For the `files` mode `name` is
  /// the file's relative path, as given to `url(file:)`.
  public func requests(for name: String) -> [RecordedRequest] { state.records { $0.name == name } }

  /// The body bytes sent for object `name` over all its recorded requests.
  public func totalBodyBytes(for name: String) -> Int {
    requests(for: name).reduce(0) { $0 + $1.bodyBytesSent }
  }

  /// Forgets all records (requests still being answered are no longer updated).
  public func resetRecords() { state.resetRecords() }

  /// Waits until at least `count` requests for `name` are complete, and returns all the requests for
  /// `name` (complete or not). Throws `TestOriginError.timedOut` after `timeout`.
  public func waitForCompletedRequests(
    for name: String, count: Int, timeout: Duration = .seconds(10)
  ) async throws -> [RecordedRequest] {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while true {
      let records = requests(for: name)
      let completed = records.filter(\.isComplete).count
      if completed >= count { return records }
      if clock.now >= deadline {
        throw TestOriginError.timedOut(name: name, expected: count, completed: completed)
      }
      try await Task.sleep(for: .milliseconds(5))
    }
  }
}

/// The origin's shared mutable state: object versions, flaky counters, records, open connections.
final class OriginState: Sendable {
  private struct Storage {
    var versions: [String: Int] = [:]
    var sizes: [String: Int] = [:]
    var headers: [String: [(String, String)]] = [:]
    var flakyCounts: [String: Int] = [:]
    var fault: TestOrigin.Fault?
    var records: [RecordedRequest] = []
    var recordIndex: [Int: Int] = [:]
    var nextRecordID = 1
    var nextConnectionID = 1
    var connections: [ObjectIdentifier: any Channel] = [:]
  }

  private let storage = Mutex(Storage())
  /// The canonical directory the `files` mode serves, if any.
  let fileRoot: String?

  init(fileRoot: String? = nil) { self.fileRoot = fileRoot }

  func setVersion(name: String, to version: Int) { storage.withLock { $0.versions[name] = version } }
  func version(of name: String) -> Int { storage.withLock { $0.versions[name] ?? 0 } }
  func setSize(name: String, to size: Int?) { storage.withLock { $0.sizes[name] = size } }
  func sizeOverride(of name: String) -> Int? { storage.withLock { $0.sizes[name] } }
  func setHeaders(name: String, _ fields: [(String, String)]) {
    storage.withLock { $0.headers[name] = fields }
  }
  func headers(of name: String) -> [(String, String)] { storage.withLock { $0.headers[name] ?? [] } }
  func resetFlakyCounters() { storage.withLock { $0.flakyCounts = [:] } }
  func setFault(_ fault: TestOrigin.Fault?) { storage.withLock { $0.fault = fault } }
  var fault: TestOrigin.Fault? { storage.withLock { $0.fault } }

  /// The number of earlier `flaky` requests for `name`, counting this one for the next caller.
  func nextFlakyCount(for name: String) -> Int {
    storage.withLock { storage in
      let count = storage.flakyCounts[name] ?? 0
      storage.flakyCounts[name] = count + 1
      return count
    }
  }

  func addConnection(_ channel: any Channel) -> Int {
    let key = ObjectIdentifier(channel)
    let id = storage.withLock { storage in
      storage.connections[key] = channel
      defer { storage.nextConnectionID += 1 }
      return storage.nextConnectionID
    }
    channel.closeFuture.whenComplete { [self] _ in
      _ = storage.withLock { $0.connections.removeValue(forKey: key) }
    }
    return id
  }

  func openConnections() -> [any Channel] { storage.withLock { Array($0.connections.values) } }

  func addRecord(_ make: (Int) -> RecordedRequest) -> Int {
    storage.withLock { storage in
      let id = storage.nextRecordID
      storage.nextRecordID += 1
      storage.recordIndex[id] = storage.records.count
      storage.records.append(make(id))
      return id
    }
  }

  func updateRecord(_ id: Int, _ change: (inout RecordedRequest) -> Void) {
    storage.withLock { storage in
      guard let index = storage.recordIndex[id] else { return }
      change(&storage.records[index])
    }
  }

  func records(where include: (RecordedRequest) -> Bool) -> [RecordedRequest] {
    storage.withLock { $0.records.filter(include) }
  }

  func resetRecords() {
    storage.withLock { storage in
      storage.records = []
      storage.recordIndex = [:]
    }
  }
}
