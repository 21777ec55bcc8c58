import AsyncHTTPClient
import Foundation
import MediaCache

/// How the cache applies HTTP caching (RFC 9111) to what origins say: `OriginClient.Configuration.freshness`,
/// `mediacache proxy --ignore-cache-control` and `--default-ttl`.
public struct FreshnessPolicy: Sendable, Equatable {
  /// Whether the origin's `Cache-Control`, `Expires` and `Vary` are ignored (nginx's
  /// `proxy_ignore_headers Cache-Control Expires Vary`): every response is stored and stays fresh for
  /// `defaultTTL`.
  /// For media origins that send `no-store` or `max-age=0` on immutable files. Default false.
  public var ignoresCacheControl = false
  /// How long a response without explicit freshness (no `max-age`, `s-maxage` or `Expires`) stays fresh
  /// (nginx's `proxy_cache_valid`). Nil (the default): a tenth of the time since its `Last-Modified` (RFC 9111
  /// 4.2.2's heuristic), at least `fallbackTTL` and at most `maxHeuristicTTL`; `fallbackTTL` without one.
  public var defaultTTL: Duration?

  /// The freshness of a response that has neither explicit freshness nor `Last-Modified`, and the least a
  /// heuristic gives (a file written a minute ago would otherwise be revalidated at every request), when
  /// `defaultTTL` is nil: two minutes (Varnish's `default_ttl`).
  public static let fallbackTTL: Duration = .seconds(120)
  /// The longest heuristic freshness (a day).
  public static let maxHeuristicTTL: Duration = .seconds(86_400)

  /// A policy honouring the origin's directives, with the given default freshness.
  public init(ignoresCacheControl: Bool = false, defaultTTL: Duration? = nil) {
    self.ignoresCacheControl = ignoresCacheControl
    self.defaultTTL = defaultTTL
  }
}

/// The `Cache-Control` directives of a response that matter to a cache (RFC 9111 5.2.2), parsed once.
struct CacheDirectives: Sendable, Equatable {
  /// A delta-seconds directive: absent, a value (clamped to 2^31, RFC 9111 1.2.2), or not a valid number.
  enum Seconds: Sendable, Equatable {
    case absent
    case value(Int64)
    case invalid
  }

  var noStore = false
  var noCache = false
  var isPrivate = false
  var isPublic = false
  var mustRevalidate = false
  var proxyRevalidate = false
  var maxAge = Seconds.absent
  var sMaxAge = Seconds.absent

  /// The largest delta-seconds value used; larger ones are taken as this (RFC 9111 1.2.2).
  static let maxDeltaSeconds: Int64 = 2_147_483_648

  /// The directives of every `Cache-Control` field value (comma-separated lists; quoted arguments may hold
  /// commas; names compared without case; the first of repeated delta-seconds directives counts).
  init(_ values: [String]) {
    for value in values {
      for (name, argument) in Self.split(value) {
        switch name {
        case "no-store": noStore = true
        case "no-cache": noCache = true
        case "private": isPrivate = true
        case "public": isPublic = true
        case "must-revalidate": mustRevalidate = true
        case "proxy-revalidate": proxyRevalidate = true
        case "max-age": if maxAge == .absent { maxAge = Self.seconds(argument) }
        case "s-maxage": if sMaxAge == .absent { sMaxAge = Self.seconds(argument) }
        default: break
        }
      }
    }
  }

  static func seconds(_ argument: String?) -> Seconds {
    guard let argument, !argument.isEmpty, argument.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
      return .invalid
    }
    // Digits only: a value too large for Int64 is as good as the maximum.
    return .value(Int64(argument).map { min($0, maxDeltaSeconds) } ?? maxDeltaSeconds)
  }

  /// `name[=argument]` items of one field value, names lowercased, quotes removed from arguments.
  static func split(_ value: String) -> [(String, String?)] {
    var items: [(String, String?)] = []
    var current = ""
    var inQuotes = false
    var escaped = false
    func finish() {
      let item = current.trimmingCharacters(in: .whitespaces)
      current = ""
      guard !item.isEmpty else { return }
      guard let equals = item.firstIndex(of: "=") else {
        items.append((item.lowercased(), nil))
        return
      }
      let name = item[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
      var argument = item[item.index(after: equals)...].trimmingCharacters(in: .whitespaces)
      if argument.count >= 2, argument.hasPrefix("\""), argument.hasSuffix("\"") {
        argument = String(argument.dropFirst().dropLast())
      }
      items.append((name, argument))
    }
    for character in value {
      if escaped {
        escaped = false
      } else if inQuotes && character == "\\" {
        escaped = true
        continue
      } else if character == "\"" {
        inQuotes.toggle()
      } else if character == "," && !inQuotes {
        finish()
        continue
      }
      current.append(character)
    }
    finish()
    return items
  }
}

/// Whether a response may be stored, how long it stays fresh and how old it is (RFC 9111 sections 3 and 4.2),
/// from its stored header fields.
struct Freshness: Sendable, Equatable {
  /// Seconds the response stays fresh after it was generated (`freshness_lifetime`).
  var lifetime: Int64
  /// Its age when it arrived, seconds (`corrected_initial_age`, the request's own delay not counted).
  var initialAge: Int64
  /// When it arrived (`response_time`).
  var receivedAt: Date
  /// Whether a stale copy may be served when revalidation fails (no `must-revalidate`, `no-cache`, and in a
  /// shared cache no `proxy-revalidate` or `s-maxage`: RFC 9111 4.2.4).
  var mayServeStale: Bool
  /// Whether `lifetime` is the heuristic's (RFC 9111 4.2.2), the response giving none and no default TTL set.
  var isHeuristic = false

  /// The freshness of a response with `headers` (and `Last-Modified` `lastModified`) under `policy`.
  init(_ headers: StoredHeaders, lastModified: String?, policy: FreshnessPolicy, shared: Bool) {
    receivedAt = headers.receivedAt
    let received = Int64(headers.receivedAt.timeIntervalSince1970.rounded(.down))
    let date = headers.first("Date").flatMap(HTTPDate.parse)
    // The first of a list; one too large is 2^31 (RFC 9111 1.2.2); one that is not a number counts as none.
    let ageText = headers.first("Age")?.split(separator: ",").first.map {
      $0.trimmingCharacters(in: .whitespaces)
    }
    let ageValue: Int64? =
      if case .value(let seconds) = CacheDirectives.seconds(ageText) { seconds } else { nil }
    let apparentAge = max(0, received - (date ?? received))
    initialAge = max(apparentAge, ageValue ?? 0)
    let directives = CacheDirectives(headers.values("Cache-Control"))
    let fallback = policy.defaultTTL.map {
      Int64(min(max(0, $0.seconds), Double(CacheDirectives.maxDeltaSeconds)).rounded(.down))
    }
    if policy.ignoresCacheControl {
      lifetime = fallback ?? Self.heuristic(lastModified: lastModified, date: date ?? received)
      isHeuristic = fallback == nil
      mayServeStale = true
      return
    }
    mayServeStale =
      !directives.mustRevalidate && !directives.noCache
      && !(shared && (directives.proxyRevalidate || directives.sMaxAge != .absent))
    if directives.noCache {
      lifetime = 0
      return
    }
    switch (shared ? directives.sMaxAge : .absent, directives.maxAge) {
    case (.value(let seconds), _): lifetime = seconds
    case (.invalid, _): lifetime = 0
    case (.absent, .value(let seconds)): lifetime = seconds
    case (.absent, .invalid): lifetime = 0
    case (.absent, .absent):
      let expiresValues = headers.values("Expires")
      if let expires = expiresValues.first {
        // An invalid date (such as "0") or several of them: already expired (RFC 9111 5.3).
        if expiresValues.count == 1, let at = HTTPDate.parse(expires) {
          lifetime = max(0, at - (date ?? received))
        } else {
          lifetime = 0
        }
      } else {
        lifetime = fallback ?? Self.heuristic(lastModified: lastModified, date: date ?? received)
        isHeuristic = fallback == nil
      }
    }
  }

  /// RFC 9111 4.2.2: a tenth of the time between `Last-Modified` and the response's date, at least two minutes
  /// and at most a day; two minutes without `Last-Modified`.
  static func heuristic(lastModified: String?, date: Int64) -> Int64 {
    let fallback = Int64(FreshnessPolicy.fallbackTTL.seconds)
    guard let modified = lastModified.flatMap(HTTPDate.parse) else { return fallback }
    return min(max(fallback, (date - modified) / 10), Int64(FreshnessPolicy.maxHeuristicTTL.seconds))
  }

  /// The response's age at `now`, seconds (`current_age`).
  func age(at now: Date) -> Int64 {
    initialAge + max(0, Int64((now.timeIntervalSince(receivedAt)).rounded(.down)))
  }

  /// Whether the response is still fresh at `now`.
  func isFresh(at now: Date) -> Bool { lifetime > age(at: now) }
}

/// What a read did about the freshness of the bytes it found cached (`CachedBytes.revalidation`).
public enum Revalidation: Sendable, Equatable {
  /// Nothing was cached, the cached bytes were fresh, or no freshness was recorded for them.
  case notNeeded
  /// They were stale, and the origin confirmed them with a `304`: fresh again.
  case notModified
  /// They were stale, and the origin answered the conditional request with the same version's bytes (it
  /// ignores conditional requests, or the object has no validators and kept its length): fresh again.
  case unchanged
  /// They were stale, and the origin has another version now: they were dropped, and the read fetches it.
  case replaced
  /// They were stale, the origin could not be reached or answered 5xx, and the response allowed serving them
  /// stale (RFC 9111 4.2.4): they are served as they are.
  case staleAfterError
}

/// The age and freshness of a read's cached response, seconds (`CachedBytes.freshness`).
public struct ObjectFreshness: Sendable, Equatable {
  /// How old the response is now (the `Age` a cache sends).
  public var age: Int64
  /// How long it stays fresh after it was generated.
  public var lifetime: Int64
  /// Seconds of freshness left (negative: stale by that much; RFC 9211's `ttl`).
  public var remaining: Int64 { lifetime - age }
}

extension Freshness {
  /// The public view at `now`.
  func view(at now: Date) -> ObjectFreshness { ObjectFreshness(age: age(at: now), lifetime: lifetime) }
}

extension OriginClient {
  /// The origin's answer to a conditional request for a cached object (`revalidate`).
  enum RevalidationAnswer: Sendable {
    /// `304 Not Modified`, with its end-to-end fields (`storedFields`).
    case notModified(StoredHeaders)
    /// Another answer (a 200 or 206), checked as a range request of the first byte.
    case modified(ResponseHead)
  }

  /// A GET of the first byte of `url` conditional on the cached version (`If-None-Match` with its entity tag,
  /// else `If-Modified-Since` with its `Last-Modified`; neither without them, and then the answer is compared
  /// with what is cached). The body is not read.
  func revalidate(_ url: String, etag: String?, lastModified: String?) async throws -> RevalidationAnswer {
    if let trustFailure { throw trustFailure }
    var request = HTTPClientRequest(url: url)
    let fields = requestHeaders(for: url, start: 0, end: 1, ifRange: nil)
    for (name, value) in fields.headers { request.headers.add(name: name, value: value) }
    if let etag {
      request.headers.add(name: "If-None-Match", value: etag)
    } else if let lastModified {
      request.headers.add(name: "If-Modified-Since", value: lastModified)
    }
    let started = ContinuousClock.now
    do {
      let response = try await execute(request, url: url)
      let answer: RevalidationAnswer
      if response.status == .notModified {
        // What the 304 says now decides whether the copy may still be stored (it may say no-store now).
        if let reason = storageRefusal(
          response.headers, sharedWithCredentials: fields.sharedWithCredentials, forwarded: fields.forwarded)
        {
          throw OriginError.notStorable(url: url, reason: reason)
        }
        // Where a redirect led this time (none: the copy's record of an earlier one goes).
        answer = .notModified(
          Self.storedFields(response.headers, receivedAt: Date()).settingResponseURL(
            Self.redirected(response, from: url)))
      } else {
        answer = .modified(
          try Self.interpret(
            status: response.status, headers: response.headers, url: url, start: 0, end: 1,
            sharedWithCredentials: fields.sharedWithCredentials, forwarded: fields.forwarded,
            responseURL: Self.redirected(response, from: url), freshness: configuration.freshness,
            sharedCache: configuration.isSharedCache))
      }
      ReaderMetrics.noteRequest(duration: .now - started, error: nil)
      return answer
    } catch {
      ReaderMetrics.noteRequest(duration: .now - started, error: error)
      throw error
    }
  }
}
