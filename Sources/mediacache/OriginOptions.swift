import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP

/// What the commands that fetch from origins send them and trust: extra trust roots and header fields.
struct OriginOptions: ParsableArguments {
  @Option(
    name: .customLong("ca-file"),
    help: ArgumentHelp(
      "Also trust the certificates in this PEM file for HTTPS origins (repeatable).",
      discussion: """
        Added to the system's trust roots: a private CA, or a self-signed origin's own certificate. \
        $SSL_CERT_FILE (a PEM bundle) and $SSL_CERT_DIR (colon-separated directories of PEM files) are read \
        too, as curl and OpenSSL read them. A file that is missing or holds no certificate stops the command \
        at start.
        """,
      valueName: "PEM"),
    completion: .file())
  var caFiles: [String] = []
  @Option(
    name: .customLong("origin-header"),
    help: ArgumentHelp(
      "Send this header field with every origin request (repeatable): credentials such as 'Authorization: "
        + "Bearer TOKEN' or 'Cookie: ...'.",
      discussion: """
        The value is never logged or written to the cache. Fields the cache sets itself (Range, If-Range, \
        Accept-Encoding, Host, framing) are refused. The proxy is a shared cache: the response to a request \
        with Authorization or Cookie is cached only if it says Cache-Control public, s-maxage or \
        must-revalidate (RFC 9111 3.5), unless the proxy runs with --private-cache.
        """,
      valueName: "NAME: VALUE"))
  var originHeader: [String] = []
  @Option(
    name: .customLong("origin-headers-file"),
    help: ArgumentHelp(
      "Read origin header fields from this file, one 'Name: value' per line (blank lines and lines starting "
        + "with # are skipped), as --origin-header; keeps secrets off the command line, which every user "
        + "of the machine can read.", valueName: "FILE"),
    completion: .file())
  var originHeadersFile: String?

  /// The `--origin-header` fields, then those of `--origin-headers-file`; throws the reason one is refused,
  /// which never shows its value (parsed here, not by a transform: ArgumentParser would echo the refused
  /// value).
  var originHeaders: [OriginHeader] {
    get throws {
      var fields = originHeader.map { ("--origin-header", $0) }
      if let originHeadersFile {
        guard let data = FileManager.default.contents(atPath: originHeadersFile), data.count <= 1 << 20 else {
          throw ValidationError("--origin-headers-file \(originHeadersFile): cannot be read (or over 1 MiB)")
        }
        // Split on any line break (a "\r\n" is one Character: splitting on "\n" would not see it).
        let lines = String(decoding: data, as: UTF8.self).split(
          omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for (index, line) in lines.enumerated() {
          let text = String(line)
          let trimmed = text.trimmingCharacters(in: .whitespaces)
          if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
          fields.append(("--origin-headers-file \(originHeadersFile) line \(index + 1)", text))
        }
      }
      return try fields.map { (source, field) in
        do { return try OriginHeader(parsing: field) } catch { throw ValidationError("\(source): \(error)") }
      }
    }
  }

  func validate() throws { _ = try originHeaders }

  /// An origin client with these trust roots and headers; throws `OriginError.invalidTrustRoots` naming a file
  /// that cannot be used.
  func client(_ configuration: OriginClient.Configuration = .init()) throws -> OriginClient {
    var configuration = configuration
    configuration.caFiles = caFiles.map { FilePath($0) }
    let headers = try originHeaders
    if !headers.isEmpty { configuration.headers = { _ in headers } }
    return try OriginClient(checking: configuration)
  }
}
