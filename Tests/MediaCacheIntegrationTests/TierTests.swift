import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Tiers of caches with a real engine between them, all on loopback: three MediaCache nodes in reverse-proxy
/// mode (`--upstream ORIGIN`) behind nginx or HAProxy spreading objects over them by consistent hashing of the
/// request URI (the configurations of `deploy/tiers/`), and an L1 MediaCache whose upstream is that engine. Every
/// byte a client gets is compared with the origin's.
@Suite(.serialized) struct TierTests {
  /// The objects of the passes: sizes that end inside chunks, so each is a few windows of the proxies.
  static let objects = (0..<24).map { ("tier\($0)", 150_000 + $0 * 37_813) }

  @Test(arguments: TierBalancer.Engine.allCases)
  func objectsLiveOnOneNodeWarmPassesStayOffTheOriginAndNodesComeAndGo(_ engine: TierBalancer.Engine)
    async throws
  {
    try await withTemporaryDirectory { directory in
      let origin = try await TestOrigin.start()
      defer { Task { try? await origin.shutdown() } }
      var nodes: [TierNode] = []
      for index in 0..<3 {
        nodes.append(try await TierNode(directory: directory, index: index, origin: origin))
      }
      let balancer = try await blocking { [nodes] in
        try TierBalancer.start(engine, in: directory, nodes: nodes.map(\.port))
      }
      defer { balancer.stop() }
      var l1Count = 0
      /// A fresh L1 (an empty cache) whose upstream is the balancer.
      func freshL1() async throws -> ProxyProcess {
        l1Count += 1
        return try await ProxyProcess(
          cache: "\(directory)/l1-\(l1Count)", ["--upstream", balancer.url, "--cache-status-name", "l1"])
      }
      func originRequests(_ name: String) -> Int { origin.requests(for: name).count }
      func pass(_ l1: ProxyProcess) async throws {
        for (name, size) in Self.objects {
          let response = try await blocking { try l1.request(TestOrigin.path(.normal, name, size: size)) }
          #expect(response.status == 200, "\(name): \(response.status)")
          #expect(sameBytes(response.body, TestOrigin.bytes(name: name, size: size)).equal, "\(name)")
        }
      }

      // A cold pass: each object is fetched from the origin by exactly one node, which keeps it.
      let first = try await freshL1()
      try await pass(first)
      var owner: [String: Int] = [:]
      for (name, size) in Self.objects {
        let holders = try await holding(nodes, origin.url(.normal, name, size: size))
        #expect(holders.count == 1, "\(name) is on nodes \(holders)")
        owner[name] = holders.first
      }
      #expect(Set(owner.values).count == 3, "the objects are spread over the three nodes: \(owner)")
      for (name, _) in Self.objects {
        #expect(Set(balancer.upstreamsServing(name)) == [nodes[owner[name] ?? 0].port], "\(name)")
      }
      #expect(await first.stop().status == 0)

      // A warm pass through another L1: the nodes answer everything, the origin sees nothing.
      let before = Self.objects.map { originRequests($0.0) }
      let second = try await freshL1()
      try await pass(second)
      #expect(Self.objects.map { originRequests($0.0) } == before, "a warm pass reached the origin")
      #expect(await second.stop().status == 0)

      // A fourth node: the balancer's configuration is reloaded; about a quarter of the objects move to it (they
      // are fetched from the origin once, by it), the others stay where they were.
      await nodes.append(try TierNode(directory: directory, index: 3, origin: origin))
      try await blocking { [nodes] in try balancer.reload(nodes: nodes.map(\.port)) }
      let third = try await freshL1()
      try await pass(third)
      var moved: [String] = []
      for ((name, size), count) in zip(Self.objects, before) {
        let holdsNew = try await nodes[3].holds(origin.url(.normal, name, size: size))
        if originRequests(name) > count {
          moved.append(name)
          #expect(holdsNew, "\(name) was fetched again, but not by the new node")
        } else {
          #expect(!holdsNew, "\(name) is on the new node without an origin request")
        }
      }
      #expect(
        (1...Self.objects.count / 2).contains(moved.count),
        "\(moved.count) of \(Self.objects.count) objects moved to the fourth node: \(moved)")
      #expect(await third.stop().status == 0)

      // A node killed while it streams: the client gets only right bytes, and its next request is served by
      // another node, which fetches the object from the origin.
      let big = ("tier-big", 24 << 20)
      let expected = TestOrigin.bytes(name: big.0, size: big.1)
      let fourth = try await freshL1()
      let url = origin.url(.normal, big.0, size: big.1)
      let (received, wrongAt, killed) = try await blocking { [nodes] in
        let connection = try RawHTTPConnection(port: fourth.port)
        defer { connection.close() }
        try connection.sendRequest("GET", TestOrigin.path(.normal, big.0, size: big.1))
        var offset = 0
        var wrongAt: Int?
        var killed: Int??
        _ = try connection.readResponse { piece in
          for (index, byte) in piece.enumerated() where wrongAt == nil && byte != expected[offset + index] {
            wrongAt = offset + index
          }
          offset += piece.count
          if offset >= 2 << 20, killed == nil {
            let holder = nodes.indices.first { (try? nodes[$0].holdsOnThisThread(url)) == true }
            killed = .some(holder)
            if let holder { nodes[holder].process.child.kill(SIGKILL) }
          }
          usleep(200)  // a player's pace: the proxies fetch windows ahead of it, not the whole object
        }
        return (offset, wrongAt, killed ?? nil)
      }
      let victim = try #require(killed, "no node held the object being streamed")
      #expect(wrongAt == nil, "a wrong byte at \(wrongAt ?? -1) of the stream cut by the kill")
      #expect(received >= 2 << 20 && received <= big.1)
      let again = try await blocking { try fourth.request(TestOrigin.path(.normal, big.0, size: big.1)) }
      #expect(again.status == 200)
      #expect(sameBytes(again.body, expected).equal, "the object after its node was killed")
      let survivors = try await holding(nodes, url).filter { $0 != victim }
      #expect(survivors.count == 1, "another node took the object: \(survivors)")
      #expect(await fourth.stop().status == 0)
      for index in nodes.indices where index != victim {
        #expect(await nodes[index].process.stop().status == 0)
      }
    }
  }
}

/// One MediaCache node of the tier: `mediacache proxy --upstream ORIGIN` on its own cache.
struct TierNode {
  let cache: String
  let process: ProxyProcess
  var port: Int { process.port }

  init(directory: String, index: Int, origin: TestOrigin) async throws {
    cache = "\(directory)/node\(index)"
    process = try await ProxyProcess(
      cache: cache, ["--upstream", origin.baseURL, "--cache-status-name", "node\(index)"])
  }

  /// Whether the node's cache holds bytes of `url` (`mediacache inspect` finds its manifest).
  func holds(_ url: String) async throws -> Bool {
    try await run(binary("mediacache"), ["inspect", "--cache", cache, url]).status == 0
  }

  /// `holds` for code already on a thread of its own (it blocks that thread).
  func holdsOnThisThread(_ url: String) throws -> Bool {
    try runOnThisThread(binary("mediacache"), ["inspect", "--cache", cache, url]).status == 0
  }
}

/// The indices of the nodes that hold `url`.
func holding(_ nodes: [TierNode], _ url: String) async throws -> [Int] {
  var holders: [Int] = []
  for index in nodes.indices where try await nodes[index].holds(url) { holders.append(index) }
  return holders
}

/// The engine in front of the nodes, configured from `deploy/tiers/` with its ports changed: nginx
/// (`nginx-tier.conf`: `hash $request_uri consistent`, the next node on a connection error or a 502, unbuffered)
/// or HAProxy (`haproxy-tier.cfg`: `balance uri whole`, `hash-type consistent`, health checks). Each logs the
/// node of every request, and answers `/.tier-version` with its configuration's version, so a reload is seen to
/// have taken effect.
struct TierBalancer {
  enum Engine: String, CaseIterable, Sendable { case nginx, haproxy }

  let engine: Engine
  let directory: String
  let process: ChildProcess
  let port: Int
  var url: String { "http://127.0.0.1:\(port)" }

  static let deployDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("deploy/tiers").path

  static func start(_ engine: Engine, in parent: String, nodes: [Int]) throws -> TierBalancer {
    let candidates =
      engine == .nginx ? ["/usr/sbin/nginx", "/usr/bin/nginx"] : ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
    let program = try #require(
      candidates.first { FileManager.default.isExecutableFile(atPath: $0) },
      "\(engine) is not installed (apt-get install \(engine); tools/test does it)")
    let directory = "\(parent)/\(engine)"
    try FileManager.default.createDirectory(atPath: "\(directory)/tmp", withIntermediateDirectories: true)
    let port = try freeLoopbackPort()
    try configure(engine, directory: directory, port: port, nodes: nodes, version: 1)
    let arguments =
      engine == .nginx
      ? ["-p", directory, "-c", "\(directory)/nginx.conf", "-g", "daemon off;"]
      : ["-W", "-db", "-f", "\(directory)/haproxy.cfg"]
    let balancer = TierBalancer(
      engine: engine, directory: directory, process: try ChildProcess(program, arguments), port: port)
    try balancer.waitForVersion(1)
    return balancer
  }

  /// Writes the engine's configuration: the deploy file with the listening port and the nodes replaced, plus
  /// what the test needs (a log naming each request's node, `/.tier-version`).
  static func configure(_ engine: Engine, directory: String, port: Int, nodes: [Int], version: Int) throws {
    let file = engine == .nginx ? "nginx-tier.conf" : "haproxy-tier.cfg"
    let deployed = try String(contentsOfFile: "\(deployDirectory)/\(file)", encoding: .utf8)
    var lines: [String] = []
    var serversWritten = false
    for line in deployed.split(separator: "\n", omittingEmptySubsequences: false) {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      if trimmed.hasPrefix("server ") && trimmed.contains("127.0.0.1:") {
        // The deploy file's node lines, one per node of the test, with the options of the first.
        guard !serversWritten else { continue }
        serversWritten = true
        let parts = trimmed.split(separator: " ")
        for (index, node) in nodes.enumerated() {
          lines.append(
            engine == .nginx
              ? "    server 127.0.0.1:\(node) \(parts.dropFirst(2).joined(separator: " "))"
              : "    server node\(index) 127.0.0.1:\(node) \(parts.dropFirst(3).joined(separator: " "))")
        }
      } else if trimmed.hasPrefix("listen 127.0.0.1:") {
        lines.append("    listen 127.0.0.1:\(port);")
        lines.append("    location = /.tier-version { return 200 \"\(version)\"; }")
      } else if trimmed.hasPrefix("bind 127.0.0.1:") {
        lines.append("    bind 127.0.0.1:\(port)")
        lines.append(
          "    http-request return status 200 content-type text/plain string \"\(version)\" if { path /.tier-version }"
        )
      } else {
        lines.append(String(line))
      }
    }
    let configured = lines.joined(separator: "\n")
    #expect(serversWritten, "\(file) names its nodes as server 127.0.0.1:PORT")
    switch engine {
    case .nginx:
      let main = """
        user root;
        worker_processes 1;
        pid \(directory)/nginx.pid;
        error_log \(directory)/error.log notice;
        events { worker_connections 512; }
        http {
          log_format tier '$request_uri $upstream_addr $status';
          access_log \(directory)/access.log tier;
          client_body_temp_path \(directory)/tmp; proxy_temp_path \(directory)/tmp;
          fastcgi_temp_path \(directory)/tmp; uwsgi_temp_path \(directory)/tmp; scgi_temp_path \(directory)/tmp;
          include \(directory)/tier.conf;
        }

        """
      try configured.write(toFile: "\(directory)/tier.conf", atomically: true, encoding: .utf8)
      try main.write(toFile: "\(directory)/nginx.conf", atomically: true, encoding: .utf8)
    case .haproxy:
      // The log goes to standard output: one line per request, `URI SERVER-ADDRESS:PORT STATUS`.
      let logged = configured.replacingOccurrences(
        of: "defaults\n",
        with:
          "defaults\n    log stdout format raw local0\n    option httplog\n    log-format \"%HU %si:%sp %ST\"\n"
      )
      try logged.write(toFile: "\(directory)/haproxy.cfg", atomically: true, encoding: .utf8)
    }
  }

  /// Waits until the engine answers with configuration `version` (after a start or a reload).
  func waitForVersion(_ version: Int) throws {
    let deadline = Date().addingTimeInterval(15)
    while true {
      if let response = try? rawRequest(port: port, "/.tier-version"),
        String(decoding: response.body, as: UTF8.self) == "\(version)"
      {
        return
      }
      guard Date() < deadline, process.process.isRunning else {
        let log = (try? String(contentsOfFile: "\(directory)/error.log", encoding: .utf8)) ?? ""
        throw RawHTTPError(
          description: "\(engine) did not answer with configuration \(version): \(log)\(process.outputSoFar)")
      }
      usleep(20_000)
    }
  }

  /// Writes a configuration with `nodes` and reloads the engine (nginx: SIGHUP; HAProxy's master: SIGUSR2),
  /// waiting until it is in use.
  func reload(nodes: [Int]) throws {
    try Self.configure(engine, directory: directory, port: port, nodes: nodes, version: 2)
    process.kill(engine == .nginx ? SIGHUP : SIGUSR2)
    try waitForVersion(2)
  }

  /// The node ports that served requests for object `name` (from the log).
  func upstreamsServing(_ name: String) -> [Int] {
    let log =
      engine == .nginx
      ? (try? String(contentsOfFile: "\(directory)/access.log", encoding: .utf8)) ?? "" : process.outputSoFar
    return log.split(separator: "\n").compactMap { line in
      let fields = line.split(separator: " ")
      guard fields.count == 3, fields[0].hasPrefix("/normal/\(name)?") else { return nil }
      return fields[1].split(separator: ":").last.flatMap { Int($0) }
    }
  }

  /// Blocks its thread (for a `defer`, which cannot await).
  func stop() {
    process.kill(SIGTERM)
    _ = process.waitOnThisThread(timeout: 15)
  }
}
