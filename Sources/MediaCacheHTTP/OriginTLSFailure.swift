import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A failed TLS handshake with an origin, classified from SwiftNIO SSL's errors. Their descriptions are
/// BoringSSL's error stack (numeric codes, build paths); this keeps only what a person can act on.
enum TLSFailure: Equatable {
  /// The certificate chain did not verify against the trust roots (untrusted issuer, self-signed, expired).
  case untrusted
  /// The chain verified, but the certificate does not name the host asked for.
  case hostnameMismatch
  /// Any other handshake failure, with BoringSSL's reason made readable (`wrong version number`).
  case handshake(String)

  /// The handshake failure `error` stands for, or nil if it is not one. A TLS error after the handshake (an
  /// origin closing without close_notify mid-body, a bad record) is a connection failure, retried like one.
  init?(_ error: any Error) {
    switch error {
    case let error as NIOSSLExtraError:
      switch error {
      case .failedToValidateHostname, .serverHostnameImpossibleToMatch: self = .hostnameMismatch
      case .invalidSNIHostname: self = .handshake("invalid server name")
      default: self = .handshake("\(error)")
      }
    case let error as NIOSSLError:
      switch error {
      case .handshakeFailed(let boring): self = Self(boring)
      case .noCertificateToValidate: self = .handshake("the origin sent no certificate")
      case .unableToValidateCertificate: self = .untrusted
      // uncleanShutdown and the like happen after the handshake too: connection failures.
      default: return nil
      }
    default: return nil
    }
  }

  private init(_ error: BoringSSLError) {
    let reasons = Self.reasons(error)
    self = reasons == ["certificate verify failed"] ? .untrusted : .handshake(reasons.joined(separator: "; "))
  }

  /// BoringSSL's reasons for `error`, readable (`wrong version number`), without codes or source paths.
  static func reasons(_ error: BoringSSLError) -> [String] {
    switch error {
    case .sslError(let stack), .unknownError(let stack), .invalidSNIName(let stack),
      .failedToSetALPN(let stack):
      let reasons = stack.map { reason(of: "\($0)") }
      if reasons.contains("certificate verify failed") { return ["certificate verify failed"] }
      return reasons.isEmpty ? ["no reason given"] : reasons
    case .zeroReturn, .syscallError: return ["the origin closed the connection"]
    default: return ["\(error)"]
    }
  }

  /// `Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at /…:320`
  /// becomes `certificate verify failed`: the reason field, without the code, library and source location.
  static func reason(of boringSSLError: String) -> String {
    var text = boringSSLError
    if let at = text.range(of: " at ", options: .backwards) { text = String(text[..<at.lowerBound]) }
    let field = text.split(separator: ":").last.map(String.init) ?? text
    return field.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "_", with: " ").lowercased()
  }

  /// The line for this failure with `host`, from the certificates the origin presents (`chain`, leaf first)
  /// when they could be read.
  func reason(host: String, chain: [NIOSSLCertificate]?) -> String {
    switch self {
    case .untrusted:
      let why = chain.map { Self.whyUntrusted($0) } ?? "certificate verify failed"
      return "TLS: certificate for \(host) is not trusted (\(why))"
    case .hostnameMismatch:
      guard let leaf = chain?.first else { return "TLS: certificate does not name \(host)" }
      let names = Self.names(of: leaf)
      guard !names.isEmpty else { return "TLS: certificate names no host, not \(host)" }
      let shown =
        names.prefix(5).joined(separator: ", ") + (names.count > 5 ? " and \(names.count - 5) more" : "")
      return "TLS: certificate is for \(shown), not \(host)"
    case .handshake(let why): return "TLS: handshake failed (\(why))"
    }
  }

  /// Why a chain that failed verification is not trusted: expired, not yet valid, self-signed, or issued by a
  /// CA that is not among the trust roots.
  static func whyUntrusted(_ chain: [NIOSSLCertificate]) -> String {
    guard let leaf = chain.first else { return "no certificate sent" }
    let now = time(nil)
    let day = { (time: time_t) in
      ISO8601DateFormatter.string(
        from: Date(timeIntervalSince1970: TimeInterval(time)), timeZone: .gmt, formatOptions: [.withFullDate])
    }
    if leaf.notValidAfter < now { return "expired on \(day(leaf.notValidAfter))" }
    if leaf.notValidBefore > now { return "not valid before \(day(leaf.notValidBefore))" }
    if leaf.subjectName == leaf.issuerName { return "self-signed" }
    let root = chain.last ?? leaf
    if chain.count > 1, root.subjectName == root.issuerName {
      return "its root CA \(describe(root.subjectName)) is not a trusted root"
    }
    return "issued by \(describe(root.issuerName)), which is not a trusted CA"
  }

  /// A name as its common name, else its organisation, else all its fields.
  static func describe(_ name: [SSLCertificateName]) -> String {
    if let common = name.first(where: { $0.type == .commonName }) { return "'\(common.value)'" }
    if let organization = name.first(where: { $0.type == .organization }) { return "'\(organization.value)'" }
    return "'" + name.map(\.value).joined(separator: ", ") + "'"
  }

  /// The DNS names and IP addresses a certificate is for (its subject alternative names, else its common
  /// name, which is what clients fall back to).
  static func names(of certificate: NIOSSLCertificate) -> [String] {
    var names: [String] = []
    for name in certificate._subjectAlternativeNames() {
      let bytes = Array(name.contents)
      if name.nameType == .dnsName {
        names.append(String(decoding: bytes, as: UTF8.self))
      } else if name.nameType == .ipAddress, let address = ipAddress(bytes) {
        names.append(address)
      }
    }
    if names.isEmpty, let common = certificate.subjectName.first(where: { $0.type == .commonName }) {
      names.append(common.value)
    }
    return names
  }

  /// An IPv4 or IPv6 address from its 4 or 16 bytes.
  static func ipAddress(_ bytes: [UInt8]) -> String? {
    let family: Int32
    switch bytes.count {
    case 4: family = AF_INET
    case 16: family = AF_INET6
    default: return nil
    }
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
    let ok = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) }
    guard ok != nil else { return nil }
    return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

/// Reads the certificates an origin presents, without trusting them, to say why a handshake failed. Used
/// only after a failure, with one connection bounded by `timeout`.
enum PeerCertificates {
  /// The chain `host:port` sends (leaf first), or nil if none arrived within `timeout`.
  static func fetch(host: String, port: Int, timeout: TimeAmount) async -> [NIOSSLCertificate]? {
    let received = Received()
    let context: NIOSSLContext
    do {
      context = try NIOSSLContext(configuration: .makeClientConfiguration())
    } catch {
      return nil
    }
    // SNI carries host names only: an IP literal is sent without it, as AsyncHTTPClient does.
    let serverName = (try? SocketAddress(ipAddress: host, port: 0)) == nil ? host : nil
    let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .connectTimeout(timeout)
      .channelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          // The callback replaces verification: it keeps the chain and ends the handshake.
          let handler = try NIOSSLClientHandler(
            context: context, serverHostname: serverName,
            customVerificationCallback: { chain, promise in
              received.chain.withLock { $0 = chain }
              promise.succeed(.failed)
            })
          try channel.pipeline.syncOperations.addHandler(handler)
        }
      }
    do {
      let channel = try await bootstrap.connect(host: host, port: port).get()
      let deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
      // The handshake fails by design, which closes the channel.
      try? await channel.closeFuture.get()
      deadline.cancel()
    } catch {
      return nil
    }
    return received.chain.withLock { $0 }
  }

  /// What the verification callback saw, shared with the connection's event loop.
  private final class Received: Sendable {
    let chain = Mutex<[NIOSSLCertificate]?>(nil)
  }
}
