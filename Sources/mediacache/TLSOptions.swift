import ArgumentParser
import MediaCache
import MediaCacheHTTP

/// Trust options of the commands that fetch from origins.
struct TLSOptions: ParsableArguments {
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

  /// An origin client with these trust roots; throws `OriginError.invalidTrustRoots` naming a file that
  /// cannot be used.
  func client(_ configuration: OriginClient.Configuration = .init()) throws -> OriginClient {
    var configuration = configuration
    configuration.caFiles = caFiles.map { FilePath($0) }
    return try OriginClient(checking: configuration)
  }
}
