import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A real HTTPS origin: nginx on 127.0.0.1 serving `Fixtures/media` with certificates made by `openssl` in a
/// temporary directory. Three servers, one port each:
/// - `trusted`: a certificate for IP 127.0.0.1 issued by a test CA (`caFile`), which is trusted only when added;
/// - `wrongName`: a certificate for `localhost` only, issued by the same CA;
/// - `selfSigned`: a self-signed certificate for 127.0.0.1.
struct TLSOrigin {
  let directory: TemporaryDirectory
  let nginx: ChildProcess
  let trustedPort: Int
  let wrongNamePort: Int
  let selfSignedPort: Int

  /// The test CA's certificate (PEM).
  var caFile: String { directory.file("ca.pem") }

  /// `https://127.0.0.1:PORT/FILE` of a file under `Fixtures/media`.
  func url(_ file: String, port: Int) -> String { "https://127.0.0.1:\(port)/\(file)" }

  /// Makes the certificates, writes nginx.conf and starts nginx, waiting until all three ports accept.
  static func start() async throws -> TLSOrigin {
    let nginxPath = try #require(
      ["/usr/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) },
      "nginx is not installed (apt-get install nginx)")
    let directory = try TemporaryDirectory()
    try makeTestCertificates(in: directory.path)
    let ports = try (0..<3).map { _ in try freeLoopbackPort() }
    let server = { (port: Int, name: String) in
      """
        server {
          listen 127.0.0.1:\(port) ssl;
          ssl_certificate \(directory.file("\(name).pem"));
          ssl_certificate_key \(directory.file("\(name).key"));
          root \(mediaFixturesDirectory);
        }
      """
    }
    let temp = directory.file("tmp")
    try FileManager.default.createDirectory(atPath: temp, withIntermediateDirectories: true)
    let conf = """
      user root;
      worker_processes 1;
      pid \(directory.file("nginx.pid"));
      error_log \(directory.file("error.log"));
      events { worker_connections 64; }
      http {
        access_log off;
        types { application/vnd.apple.mpegurl m3u8; video/mp2t ts; video/mp4 mp4 m4s; }
        client_body_temp_path \(temp); proxy_temp_path \(temp); fastcgi_temp_path \(temp);
        uwsgi_temp_path \(temp); scgi_temp_path \(temp);
      \(server(ports[0], "trusted"))
      \(server(ports[1], "wrongname"))
      \(server(ports[2], "selfsigned"))
      }
      """
    try conf.write(toFile: directory.file("nginx.conf"), atomically: true, encoding: .utf8)
    let nginx = try ChildProcess(
      nginxPath, ["-p", directory.path, "-c", directory.file("nginx.conf"), "-g", "daemon off;"])
    let origin = TLSOrigin(
      directory: directory, nginx: nginx, trustedPort: ports[0], wrongNamePort: ports[1],
      selfSignedPort: ports[2])
    let deadline = Date().addingTimeInterval(15)
    for port in ports {
      while (try? connectLoopback(port, timeout: 1)).map({ close($0) }) == nil {
        guard Date() < deadline, nginx.process.isRunning else {
          await origin.stop()
          let log = (try? String(contentsOfFile: directory.file("error.log"), encoding: .utf8)) ?? ""
          throw RawHTTPError(description: "nginx did not start on port \(port): \(log)")
        }
        try await Task.sleep(for: .milliseconds(20))
      }
    }
    return origin
  }

  /// Stops nginx and removes the directory.
  func stop() async {
    nginx.kill(SIGTERM)
    _ = await nginx.wait(timeout: 15)
    directory.cleanup()
  }
}

/// Runs `body` with a fresh `TLSOrigin`, stopped afterwards (nginx started and waited for on threads of their
/// own); `body` runs in the test's own context, so that its expectations are recorded against the test.
func withTLSOrigin<T>(_ body: (TLSOrigin) async throws -> T) async throws -> T {
  let origin = try await TLSOrigin.start()
  do {
    let result = try await body(origin)
    await origin.stop()
    return result
  } catch {
    await origin.stop()
    throw error
  }
}
