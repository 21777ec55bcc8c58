import Foundation
import MediaCache
import NIOSSL

/// Certificates trusted for HTTPS origins on top of the system's roots: `--ca-file` bundles, and the
/// `SSL_CERT_FILE` / `SSL_CERT_DIR` variables that OpenSSL and curl read. BoringSSL (inside SwiftNIO SSL) reads
/// neither variable, so they are read here. Everything is loaded and checked when the client is made, so a bad
/// path is reported at startup naming it, not as a handshake failure on the first request.
enum OriginTrust {
  /// The extra roots: every certificate of `caFiles`, then of `SSL_CERT_FILE`, then of each `SSL_CERT_DIR`
  /// directory (colon-separated, as OpenSSL reads it), without duplicates.
  static func load(caFiles: [FilePath], environment: [String: String]) throws(OriginError)
    -> [NIOSSLCertificate]
  {
    var certificates: [NIOSSLCertificate] = []
    var seen = Set<NIOSSLCertificate>()
    func add(_ found: [NIOSSLCertificate]) {
      for certificate in found where seen.insert(certificate).inserted { certificates.append(certificate) }
    }
    for path in caFiles { add(try file(path.string, source: "CA file")) }
    if let path = environment["SSL_CERT_FILE"], !path.isEmpty {
      add(try file(path, source: "SSL_CERT_FILE"))
    }
    if let list = environment["SSL_CERT_DIR"] {
      for directory in list.split(separator: ":").map(String.init) where !directory.isEmpty {
        add(try self.directory(directory, source: "SSL_CERT_DIR"))
      }
    }
    return certificates
  }

  /// The certificates of one PEM bundle (or a single DER certificate); throws naming `path` if it is missing,
  /// unreadable, or holds no certificate.
  static func file(_ path: String, source: String) throws(OriginError) -> [NIOSSLCertificate] {
    let invalid = invalidRoots(path, source: source)
    try require(.file, at: path, invalid)
    let bytes: [UInt8]
    do {
      bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    } catch {
      throw invalid("cannot be read (\((error as NSError).localizedDescription))")
    }
    if let certificates = parse(bytes), !certificates.isEmpty { return certificates }
    if String(decoding: bytes, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") {
      throw invalid("holds a PEM certificate that cannot be parsed")
    }
    throw invalid("holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)")
  }

  /// Every certificate in the files of `path` (OpenSSL's hashed directories hold links named `HASH.0`, but
  /// any file name is read). Files that hold no certificate (CRLs, notes) are skipped, as OpenSSL skips
  /// them, and a directory without any adds nothing; a directory that is missing or unreadable is an error.
  static func directory(_ path: String, source: String) throws(OriginError) -> [NIOSSLCertificate] {
    let invalid = invalidRoots(path, source: source)
    try require(.directory, at: path, invalid)
    let names: [String]
    do {
      names = try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    } catch {
      throw invalid("cannot be listed (\((error as NSError).localizedDescription))")
    }
    var certificates: [NIOSSLCertificate] = []
    for name in names where !name.hasPrefix(".") {
      let file = (path as NSString).appendingPathComponent(name)
      guard kind(of: file) == .file, let data = FileManager.default.contents(atPath: file),
        let found = parse([UInt8](data))
      else { continue }
      certificates += found
    }
    return certificates
  }

  /// A file, a directory (symlinks followed), or nil when nothing is there.
  enum EntryKind { case file, directory }

  static func kind(of path: String) -> EntryKind? {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return nil }
    return isDirectory.boolValue ? .directory : .file
  }

  /// Throws unless `path` exists and is of the `expected` kind (a PEM file, or a directory of them).
  static func require(
    _ expected: EntryKind, at path: String, _ invalid: (String) -> OriginError
  ) throws(OriginError) {
    switch (expected, kind(of: path)) {
    case (.file, nil): throw invalid("no such file")
    case (.directory, nil): throw invalid("no such directory")
    case (.file, .directory?): throw invalid("is a directory, not a PEM file")
    case (.directory, .file?): throw invalid("is not a directory")
    case (.file, .file?), (.directory, .directory?): return
    }
  }

  /// Builds the error that names `path` (from `source`) and says why it cannot be used.
  static func invalidRoots(_ path: String, source: String) -> (String) -> OriginError {
    { reason in OriginError.invalidTrustRoots(source: source, path: FilePath(path), reason: reason) }
  }

  /// The certificates of a PEM file, or of one DER certificate; nil if the bytes are neither.
  static func parse(_ bytes: [UInt8]) -> [NIOSSLCertificate]? {
    if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE-----") {
      return try? NIOSSLCertificate.fromPEMBytes(bytes)
    }
    // A DER certificate starts with an ASN.1 SEQUENCE; anything else is not worth handing to the parser.
    guard bytes.first == 0x30, let certificate = try? NIOSSLCertificate(bytes: bytes, format: .der) else {
      return nil
    }
    return [certificate]
  }
}
