import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Makes in `directory`, with `openssl`, a test CA (`ca.pem`, `ca.key`), two server certificates it issues
/// (`trusted.pem`/`.key` for IP 127.0.0.1, `wrongname.pem`/`.key` for DNS localhost only) and a self-signed
/// one for 127.0.0.1 (`selfsigned.pem`/`.key`). EC keys, so that making them takes milliseconds. Used by the
/// HTTPS tests' nginx (`TLSOrigin`) and the soak's HTTPS origin.
public func makeTestCertificates(in directory: String) throws {
  let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
  try openssl(
    ["req", "-x509"] + key + [
      "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=MediaCache Test CA",
      "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    ], in: directory)
  for (name, subject, alternativeName) in [
    ("trusted", "/CN=127.0.0.1", "IP:127.0.0.1"), ("wrongname", "/CN=localhost", "DNS:localhost"),
  ] {
    try "subjectAltName=\(alternativeName)\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
      .write(toFile: "\(directory)/\(name).ext", atomically: true, encoding: .utf8)
    try openssl(
      ["req"] + key + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", subject], in: directory)
    try openssl(
      [
        "x509", "-req", "-in", "\(name).csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "\(name).pem", "-days", "2", "-extfile", "\(name).ext",
      ], in: directory)
  }
  try openssl(
    ["req", "-x509"] + key + [
      "-keyout", "selfsigned.key", "-out", "selfsigned.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
      "-addext", "subjectAltName=IP:127.0.0.1",
    ], in: directory)
}

private func openssl(_ arguments: [String], in directory: String) throws {
  let (process, errors) = try spawningAlone {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    process.currentDirectoryURL = URL(fileURLWithPath: directory)
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    return (process, errors)
  }
  let message = errors.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  guard process.terminationStatus == 0 else {
    throw RawHTTPError(
      description: "openssl \(arguments.joined(separator: " ")): \(String(decoding: message, as: UTF8.self))")
  }
}

/// A port of 127.0.0.1 nothing listens on now (bound to port 0 and released; a server binds it right after).
public func freeLoopbackPort() throws -> Int {
  #if canImport(Glibc)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  #else
    let fd = socket(AF_INET, SOCK_STREAM, 0)
  #endif
  guard fd >= 0 else { throw RawHTTPError(description: "socket: errno \(errno)") }
  defer { close(fd) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  address.sin_port = 0
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  let bound = withUnsafeMutablePointer(to: &address) { pointer in
    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
      bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
    }
  }
  guard bound else { throw RawHTTPError(description: "bind: errno \(errno)") }
  return Int(UInt16(bigEndian: address.sin_port))
}
