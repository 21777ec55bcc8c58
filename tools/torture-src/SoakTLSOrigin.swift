import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The soak's HTTPS origin: nginx on 127.0.0.1 terminating TLS with a certificate of a test CA and passing
/// every request to the test origin, so an object read over HTTPS has the test origin's bytes, validators and
/// faults. Its own fault is a failed certificate rollout: the certificate is swapped for a self-signed one and
/// nginx reloaded, so every new handshake fails verification until it is swapped back.
struct SoakTLSOrigin: Sendable {
  let directory: String
  let port: Int
  let nginx: Child

  /// The test CA's certificate, which the proxy is given with `--ca-file`.
  var caFile: String { "\(directory)/ca.pem" }

  /// `https://127.0.0.1:PORT` followed by the path and query of the test origin's `url`.
  func url(for url: String) -> String {
    guard let components = URLComponents(string: url) else { return url }
    return "https://127.0.0.1:\(port)\(components.percentEncodedPath)"
      + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
  }

  /// Makes the certificates and starts nginx in front of the test origin on `originPort`; throws why not
  /// (nginx or openssl missing, nginx not listening within 15 s).
  static func start(directory: String, originPort: Int) throws -> SoakTLSOrigin {
    guard
      let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"].first(where: FileManager.default.isExecutableFile)
    else { throw TortureError("nginx is not installed") }
    try FileManager.default.createDirectory(atPath: "\(directory)/tmp", withIntermediateDirectories: true)
    try makeTestCertificates(in: directory)
    let port = try freeLoopbackPort()
    try link(trusted: true, in: directory)
    let temp = "\(directory)/tmp"
    let conf = """
      \(getuid() == 0 ? "user root;" : "")
      worker_processes 1;
      pid \(directory)/nginx.pid;
      error_log \(directory)/error.log;
      events { worker_connections 4096; }
      http {
        access_log off;
        client_body_temp_path \(temp); proxy_temp_path \(temp); fastcgi_temp_path \(temp);
        uwsgi_temp_path \(temp); scgi_temp_path \(temp);
        server {
          listen 127.0.0.1:\(port) ssl;
          ssl_certificate \(directory)/current.pem;
          ssl_certificate_key \(directory)/current.key;
          keepalive_requests 100000;
          location / {
            proxy_pass http://127.0.0.1:\(originPort);
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 120s;
          }
        }
      }
      """
    try conf.write(toFile: "\(directory)/nginx.conf", atomically: true, encoding: .utf8)
    let child = try Child(
      nginx, ["-p", directory, "-c", "\(directory)/nginx.conf", "-g", "daemon off;"],
      stdout: "\(directory)/nginx.out", stderr: "\(directory)/nginx.err")
    let origin = SoakTLSOrigin(directory: directory, port: port, nginx: child)
    let deadline = monotonicSeconds() + 15
    while (try? connectLoopback(port, timeout: 1)).map({ close($0) }) == nil {
      guard monotonicSeconds() < deadline, child.isRunning else {
        origin.stop()
        let log = (try? String(contentsOfFile: "\(directory)/error.log", encoding: .utf8)) ?? ""
        throw TortureError("nginx did not listen on port \(port): \(child.stderrText) \(log)")
      }
      usleep(20_000)
    }
    return origin
  }

  /// Points `current.pem`/`current.key` at the CA-issued certificate (`trusted`) or the self-signed one.
  private static func link(trusted: Bool, in directory: String) throws {
    let name = trusted ? "trusted" : "selfsigned"
    for suffix in ["pem", "key"] {
      let temporary = "\(directory)/current.\(suffix).new"
      unlink(temporary)
      guard symlink("\(directory)/\(name).\(suffix)", temporary) == 0,
        rename(temporary, "\(directory)/current.\(suffix)") == 0
      else { throw TortureError("cannot link \(name).\(suffix) in \(directory): errno \(errno)") }
    }
  }

  /// Presents the CA-issued certificate (`trusted`) or the self-signed one to new connections: relinks and
  /// reloads nginx (SIGHUP; its old worker closes idle connections and ends with its last busy one), then
  /// waits until a handshake shows the certificate asked for (at most 5 s). Returns whether it did.
  @discardableResult
  func present(trusted: Bool) -> Bool {
    guard (try? Self.link(trusted: trusted, in: directory)) != nil else { return false }
    nginx.signal(SIGHUP)
    let deadline = monotonicSeconds() + 5
    while monotonicSeconds() < deadline {
      if verifies() == trusted { return true }
      usleep(50_000)
    }
    return false
  }

  /// Whether a new handshake verifies against the test CA (`openssl s_client -verify_return_error`).
  func verifies() -> Bool {
    let status = try? runQuiet(
      "/usr/bin/openssl",
      ["s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", caFile, "-verify_return_error", "-brief"])
    return status == 0
  }

  func stop() {
    nginx.signal(SIGTERM)
    _ = nginx.wait(timeout: 15)
  }
}
