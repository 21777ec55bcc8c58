import Foundation
import NIOCore
import NIOHTTP1

/// What the origin answers to one request: decided at once when the request has been read.
struct ResponsePlan {
  enum Body {
    /// A small fixed body (error texts).
    case fixed([UInt8])
    /// Object bytes `range` in pieces of `pieceSize` with `delay` after each piece; only the first
    /// `limit` bytes are sent when `limit` is set (then the connection is closed).
    case object(seed: UInt64, range: Range<Int>, pieceSize: Int, delay: TimeAmount?, limit: Int?)
    /// A gzip stream (stored blocks) of the object's bytes.
    case gzip(seed: UInt64, size: Int)
    /// Bytes `range` of a file (`files` mode) in pieces of `pieceSize`.
    case file(OpenFile, range: Range<Int>, pieceSize: Int)
  }

  var mode: String
  var name: String
  var status: HTTPResponseStatus
  var headers: HTTPHeaders
  /// Nil for HEAD and bodiless statuses.
  var body: Body?
  /// Close the connection after the response (the client asked for it, or `truncated`).
  /// In `slow`: body bytes sent before the per-piece delay starts (`burst=N`): an origin that sends the first
  /// bytes at once, then trickles.
  var burst = 0
  var closeAfter = false
  /// Close the connection after the body without ending the response (`truncated`).
  var truncates = false
  /// Close the connection without any response (the `connectionResets` fault).
  var resets = false
}

/// A parsed `Range` header, against an object of a known size.
enum RangeRequest: Equatable {
  /// No usable Range (absent, not `bytes`, several ranges, malformed): answer the full body.
  case none
  case unsatisfiable
  case range(Range<Int>)

  init(header: String?, size: Int) {
    guard let header else {
      self = .none
      return
    }
    let trimmed = header.trimmingASCIISpaces()
    guard trimmed.lowercased().hasPrefix("bytes=") else {
      self = .none
      return
    }
    let spec = trimmed.dropFirst("bytes=".count).trimmingASCIISpaces()
    guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else {
      self = .none
      return
    }
    let first = String(spec[..<dash]).trimmingASCIISpaces()
    let second = String(spec[spec.index(after: dash)...]).trimmingASCIISpaces()
    if first.isEmpty {
      guard let suffix = Self.number(second) else {
        self = .none
        return
      }
      self = suffix == 0 || size == 0 ? .unsatisfiable : .range(max(0, size - suffix)..<size)
      return
    }
    guard let start = Self.number(first) else {
      self = .none
      return
    }
    if second.isEmpty {
      self = start >= size ? .unsatisfiable : .range(start..<size)
      return
    }
    guard let end = Self.number(second), end >= start else {
      self = .none
      return
    }
    self = start >= size ? .unsatisfiable : .range(start..<min(end, size - 1) + 1)
  }

  private static func number(_ text: String) -> Int? {
    guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    return Int(text)
  }
}

extension StringProtocol {
  func trimmingASCIISpaces() -> String {
    var slice = Substring(self)
    while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
    while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
    return String(slice)
  }
}

enum ResponsePlanner {
  static let pieceSize = 64 * 1024
  static let slowPieceSize = 16 * 1024
  static let defaultSlowDelayMilliseconds = 20
  static let defaultFlakyFailures = 2
  static let wrongRangeShift = 1000

  /// Decides the answer to `head`. `localHost`/`localPort` name the listening socket (for `Location`).
  static func plan(for head: HTTPRequestHead, state: OriginState, localHost: String, localPort: Int)
    -> ResponsePlan
  {
    var plan = decide(head, state: state, localHost: localHost, localPort: localPort)
    if !head.isKeepAlive {
      plan.closeAfter = true
      plan.headers.replaceOrAdd(name: "Connection", value: "close")
    }
    return plan
  }

  private static func decide(_ head: HTTPRequestHead, state: OriginState, localHost: String, localPort: Int)
    -> ResponsePlan
  {
    let target = head.uri
    let pathPart: Substring
    let queryPart: Substring
    if let question = target.firstIndex(of: "?") {
      pathPart = target[..<question]
      queryPart = target[target.index(after: question)...]
    } else {
      pathPart = target[...]
      queryPart = ""
    }
    let segments = pathPart.drop(while: { $0 == "/" })
    let modeText: String
    let name: String
    if let slash = segments.firstIndex(of: "/") {
      modeText = String(segments[..<slash])
      name = String(segments[segments.index(after: slash)...])
    } else {
      modeText = String(segments)
      name = ""
    }
    let query = queryPart.split(separator: "&", omittingEmptySubsequences: true).map {
      item -> (String, String) in
      if let equals = item.firstIndex(of: "=") {
        return (String(item[..<equals]), String(item[item.index(after: equals)...]))
      }
      return (String(item), "")
    }
    func queryInt(_ key: String) -> Int? {
      guard let value = query.last(where: { $0.0 == key })?.1, let number = Int(value), number >= 0 else {
        return nil
      }
      return number
    }

    var plan = ResponsePlan(mode: modeText, name: name, status: .ok, headers: HTTPHeaders())

    func fail(_ status: HTTPResponseStatus, _ message: String) {
      plan.status = status
      let body = Array("\(message)\n".utf8)
      plan.headers.replaceOrAdd(name: "Content-Type", value: "text/plain; charset=utf-8")
      plan.headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
      plan.body = head.method == .HEAD ? nil : .fixed(body)
    }

    guard head.method == .GET || head.method == .HEAD else {
      fail(.methodNotAllowed, "only GET and HEAD")
      plan.headers.add(name: "Allow", value: "GET, HEAD")
      return plan
    }
    guard let mode = TestOrigin.Mode(rawValue: modeText) else {
      fail(.notFound, "unknown mode '\(modeText)'; modes: \(TestOrigin.Mode.allCases.map(\.rawValue))")
      return plan
    }
    if mode == .files {
      // Recorded under the decoded relative path (what `url(file:)` was given) when it decodes.
      plan.name = FilePaths.decodedRelativePath(name[...]) ?? name
      guard let root = state.fileRoot else {
        fail(.notFound, "no file root: start the origin with fileRoot")
        return plan
      }
      guard let file = OpenFile.open(requestPath: name[...], root: root) else {
        fail(.notFound, "no such file under the file root: '\(name)'")
        return plan
      }
      addRepresentationHeaders(
        to: &plan, contentType: file.contentType, rangeable: true, etag: file.etag,
        lastModified: file.lastModified)
      for (field, value) in state.headers(of: plan.name) { plan.headers.add(name: field, value: value) }
      if let range = answerConditionalAndRange(
        head, plan: &plan, size: file.size, etag: file.etag, lastModified: file.lastModified)
      {
        plan.body = .file(file, range: range, pieceSize: pieceSize)
      }
      return plan
    }
    guard !name.isEmpty else {
      fail(.notFound, "no object name: use /\(mode.rawValue)/<name>?size=N")
      return plan
    }
    guard let size = state.sizeOverride(of: name) ?? queryInt("size") else {
      fail(.badRequest, "missing or invalid ?size=N")
      return plan
    }
    // `auth=TOKEN`: only a request with `Authorization: Bearer TOKEN` gets the object (else 401).
    if let token = query.last(where: { $0.0 == "auth" })?.1,
      head.headers.first(name: "Authorization") != "Bearer \(token)"
    {
      fail(.unauthorized, "this object needs Authorization: Bearer <token>")
      plan.headers.add(name: "WWW-Authenticate", value: "Bearer")
      return plan
    }
    // `header=NAME:VALUE` (percent-encoded, repeatable), then the fields `TestOrigin.setHeaders` set.
    func addFields() {
      for (key, value) in query where key == "header" {
        let field = value.removingPercentEncoding ?? value
        guard let colon = field.firstIndex(of: ":") else { continue }
        let fieldValue = field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        plan.headers.add(name: String(field[..<colon]), value: fieldValue)
      }
      for (name, value) in state.headers(of: name) { plan.headers.add(name: name, value: value) }
    }
    // `status=N`: answered N, with a one-line body (none for 1xx, 204 and 304) and the fields above; with
    // `delay-ms=M`, 64 bytes of object `name` in two pieces, M ms after each (an error page that trickles).
    if let status = queryInt("status") {
      fail(HTTPResponseStatus(statusCode: status), "status \(status) for \(name)")
      if let delay = queryInt("delay-ms"), head.method == .GET {
        plan.headers.replaceOrAdd(name: "Content-Length", value: "64")
        plan.body = .object(
          seed: ObjectBytes.seed(name: name, version: 0), range: 0..<64, pieceSize: 32,
          delay: .milliseconds(Int64(delay)), limit: nil)
      }
      if status < 200 || status == 204 || status == 304 {
        plan.body = nil
        plan.headers.remove(name: "Content-Length")
        plan.headers.remove(name: "Content-Type")
      }
      addFields()
      return plan
    }
    let version = state.version(of: name)
    let seed = ObjectBytes.seed(name: name, version: version)
    let isHead = head.method == .HEAD

    switch mode {
    case .redirect:
      let hops = max(1, queryInt("hops") ?? 1)
      var items = query.filter { !["hops", "size", "host"].contains($0.0) }.map { "\($0.0)=\($0.1)" }
      items.insert("size=\(queryInt("size") ?? size)", at: 0)
      let nextMode: TestOrigin.Mode = hops > 1 ? .redirect : .normal
      if hops > 1 { items.append("hops=\(hops - 1)") }
      // `host=NAME`: the redirect names this origin by another host name (its port the same).
      let host = query.first { $0.0 == "host" }?.1 ?? localHost
      let authority = host.contains(":") ? "[\(host)]:\(localPort)" : "\(host):\(localPort)"
      plan.status = .found
      // `to=PATH`: the redirect leads to this origin's PATH (for example a file's, `/files/...`).
      if let path = query.first(where: { $0.0 == "to" })?.1, path.hasPrefix("/") {
        plan.headers.add(name: "Location", value: "http://\(authority)\(path)")
        plan.headers.add(name: "Content-Length", value: "0")
        return plan
      }
      plan.headers.add(
        name: "Location",
        value: "http://\(authority)/\(nextMode.rawValue)/\(name)?\(items.joined(separator: "&"))")
      plan.headers.add(name: "Content-Length", value: "0")
      return plan
    case .flaky:
      let failures = queryInt("failures") ?? defaultFlakyFailures
      let count = state.nextFlakyCount(for: name)
      if count < failures {
        fail(.internalServerError, "flaky: failure \(count + 1) of \(failures) for \(name)")
        return plan
      }
    default:
      break
    }
    // A fault set by `TestOrigin.setFault` (normal mode only).
    let fault = mode == .normal ? state.fault : nil
    if fault == .serverErrors {
      fail(.serviceUnavailable, "fault: server errors")
      return plan
    }
    if fault == .connectionResets {
      plan.resets = true
      return plan
    }
    if case .redirects(let host) = fault {
      plan.status = .found
      plan.headers.add(name: "Location", value: "http://\(host):\(localPort)\(head.uri)")
      plan.headers.add(name: "Content-Length", value: "0")
      return plan
    }

    let etag: String? = mode == .lastmod ? nil : TestOrigin.etag(name: name, version: version)
    let lastModified = TestOrigin.lastModified(version: version)
    let rangeable = mode != .norange && mode != .gzip
    addRepresentationHeaders(
      to: &plan, contentType: "video/mp4", rangeable: rangeable, etag: etag, lastModified: lastModified)
    // `cache-control=VALUE` (percent-encoded): sent as the response's Cache-Control.
    if let value = query.last(where: { $0.0 == "cache-control" })?.1 {
      plan.headers.add(name: "Cache-Control", value: value.removingPercentEncoding ?? value)
    }
    addFields()

    if mode == .gzip {
      plan.headers.add(name: "Content-Encoding", value: "gzip")
      plan.headers.add(name: "Content-Length", value: String(GzipProducer.encodedSize(of: size)))
      plan.body = isHead ? nil : .gzip(seed: seed, size: size)
      return plan
    }

    let chunked = mode == .chunked
    guard
      let range = answerConditionalAndRange(
        head, plan: &plan, size: size, etag: etag, lastModified: lastModified, rangeable: rangeable,
        chunked: chunked, shiftsRange: mode == .wrongrange)
    else { return plan }

    var slow = mode == .slow
    var delay =
      slow ? TimeAmount.milliseconds(Int64(queryInt("delay-ms") ?? defaultSlowDelayMilliseconds)) : nil
    if case .slowBodies(let milliseconds) = fault {
      slow = true
      delay = .milliseconds(Int64(milliseconds))
    }
    let truncates = mode == .truncated || fault == .cutBodies
    let limit = truncates ? range.count / 2 : nil
    if slow { plan.burst = queryInt("burst") ?? 0 }
    plan.body = .object(
      seed: seed, range: range, pieceSize: slow ? slowPieceSize : pieceSize, delay: delay, limit: limit)
    if truncates {
      plan.truncates = true
      plan.closeAfter = true
    }
    return plan
  }

  /// Adds Content-Type, Accept-Ranges (`bytes` or `none`), ETag (when there is one) and Last-Modified.
  private static func addRepresentationHeaders(
    to plan: inout ResponsePlan, contentType: String, rangeable: Bool, etag: String?, lastModified: String
  ) {
    plan.headers.add(name: "Content-Type", value: contentType)
    plan.headers.add(name: "Accept-Ranges", value: rangeable ? "bytes" : "none")
    if let etag { plan.headers.add(name: "ETag", value: etag) }
    plan.headers.add(name: "Last-Modified", value: lastModified)
  }

  /// The `normal` mode's answer for a representation of `size` bytes (shared by every mode but `gzip`):
  /// `If-None-Match` / `If-Modified-Since` (304), `Range` with `If-Range` (206, 416 or 200), Content-Range
  /// and the framing headers. Returns the range of the representation to send as the body, or nil when
  /// the answer has none (304, 416, HEAD). `chunked` frames with `Transfer-Encoding: chunked` and `*` as
  /// the complete length; `shiftsRange` answers a shifted range (`wrongrange`).
  private static func answerConditionalAndRange(
    _ head: HTTPRequestHead, plan: inout ResponsePlan, size: Int, etag: String?, lastModified: String,
    rangeable: Bool = true, chunked: Bool = false, shiftsRange: Bool = false
  ) -> Range<Int>? {
    if let ifNoneMatch = head.headers.first(name: "If-None-Match") {
      let tags = ifNoneMatch.split(separator: ",").map { tag -> String in
        let trimmed = tag.trimmingASCIISpaces()
        return trimmed.hasPrefix("W/") ? String(trimmed.dropFirst(2)) : trimmed
      }
      if let etag, tags.contains(etag) || tags.contains("*") {
        plan.status = .notModified
        return nil
      }
    } else if let since = head.headers.first(name: "If-Modified-Since"),
      since.trimmingASCIISpaces() == lastModified
    {
      plan.status = .notModified
      return nil
    }

    let isHead = head.method == .HEAD
    var rangeRequest = RangeRequest.none
    if rangeable && !isHead, let rangeHeader = head.headers.first(name: "Range") {
      var useRange = true
      if let ifRange = head.headers.first(name: "If-Range") {
        useRange = ifRangeMatches(ifRange, etag: etag, lastModified: lastModified)
      }
      if useRange { rangeRequest = RangeRequest(header: rangeHeader, size: size) }
    }

    var range = 0..<size
    switch rangeRequest {
    case .none:
      plan.status = .ok
    case .unsatisfiable:
      plan.status = .rangeNotSatisfiable
      if !chunked { plan.headers.add(name: "Content-Range", value: "bytes */\(size)") }
      plan.headers.add(name: "Content-Length", value: "0")
      return nil
    case .range(let requested):
      plan.status = .partialContent
      range = shiftsRange ? shifted(requested, size: size) : requested
      let total = chunked ? "*" : String(size)
      plan.headers.add(
        name: "Content-Range", value: "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)")
    }

    if chunked {
      // A HEAD answer carries no body, so no framing (and no chunk terminator with older encoders).
      if !isHead { plan.headers.add(name: "Transfer-Encoding", value: "chunked") }
    } else {
      plan.headers.add(name: "Content-Length", value: String(range.count))
    }
    return isHead ? nil : range
  }

  /// Whether an `If-Range` value names the current representation: an entity tag must equal the current
  /// strong ETag (a weak tag never matches); a date must equal Last-Modified exactly.
  static func ifRangeMatches(_ value: String, etag: String?, lastModified: String) -> Bool {
    let value = value.trimmingASCIISpaces()
    if value.hasPrefix("W/") { return false }
    if value.hasPrefix("\"") { return etag == value }
    return value == lastModified
  }

  /// `requested` moved by `wrongRangeShift` bytes (forward, or backward when that passes the end), same
  /// length where the object allows; never equal to `requested` unless the object has a single byte.
  static func shifted(_ requested: Range<Int>, size: Int) -> Range<Int> {
    let length = requested.count
    var start =
      requested.lowerBound + wrongRangeShift < size
      ? requested.lowerBound + wrongRangeShift : max(0, requested.lowerBound - wrongRangeShift)
    var end = min(start + length, size)
    if start == requested.lowerBound && end == requested.upperBound {
      if length > 1 {
        end -= 1
      } else if size > 1 {
        start = (requested.lowerBound + 1) % size
        end = start + 1
      }
    }
    return start..<end
  }
}
