import Foundation
import Logging
import MediaCache
import NIOPosix
import Synchronization

/// Reads any byte range of a remote object through the cache: cached bytes come from disk (CRC-checked, whole
/// chunks and spans of incomplete ones), missing runs from the origin with range requests that start at the
/// byte asked for and stop before the next cached byte, streamed to the reader as they arrive and written to
/// the cache at the same time.
///
/// Concurrent readers of the same missing bytes in this process share one origin request, and no two origin
/// requests of the process ask for the same byte (a new one stops where a running one ahead begins). When the
/// last reader of a request has its range, the request stops at once; when it goes away early, the request
/// takes what arrives within `Configuration.abandonedRequestGrace`, at most
/// `Configuration.abandonedRequestReadAhead` more (a player that dropped it usually comes back for those
/// bytes), then stops; every byte that arrived stays cached. A prefetch's request stops at once. With
/// `Configuration.originRequestWindow` set, a streamed read asks the origin for a bounded lead ahead of its
/// reader rather than for the whole run. A chunk or span that fails its CRC on read is dropped and fetched
/// again without the reader noticing.
///
/// Playback first: foreground reads (`read`) are not limited by a slot count unless
/// `Configuration.maxForegroundRequests` is set; background reads (`prefetch`, `read(priority: .background)`) are
/// limited per origin host and wait while a foreground request for that host waits.
public final class CachingReader: Sendable {
  /// Limits and retries.
  public struct Configuration: Sendable {
    /// Foreground origin requests (players, `read`) at once in this process; nil (the default): no limit, so a
    /// player never waits for a request slot held by another object's reader. A cap makes players wait behind
    /// each other when more objects than this are read at once: set one only to protect an origin.
    public var maxForegroundRequests: Int?
    /// Background origin requests (`prefetch`, `fetch --hls`, preloading) at once per origin host and process
    /// (default 6). Background requests for a host also wait while a foreground request for that host waits.
    public var maxBackgroundRequestsPerHost = 6
    /// How far ahead a streamed read keeps the origin asked for bytes, at least (default 0: one request to the
    /// end of the run, as a plain proxy would; `mediacache proxy` uses 256 KiB). The lead is this window plus
    /// an eighth of what the read's reader has consumed (so a long stream soon asks for megabytes at once); the
    /// next origin request, for one lead past what has arrived, goes out once the reader is within half a lead
    /// of it. A player that drops a `bytes=N-` connection after a few megabytes (to jump to a moov at the end,
    /// or to seek) thereby leaves at most one and a half leads fetched that it did not read, however fast the
    /// origin sends. The price is a request per window: over a long round trip a stream starts slower until
    /// its lead has grown. Prefetches are not windowed.
    public var originRequestWindow: Int64 = 0
    /// The most an origin request fetches past what had arrived after its last reader left (default 4 MiB;
    /// 0: it stops at once), taken only while `abandonedRequestGrace` lasts. A player that drops a
    /// `bytes=N-` connection (to jump to a moov at the end) usually comes back for what follows and joins the
    /// request; and bytes the origin already sent are on their way whatever the cache does: cut at once, a fast
    /// origin's socket buffers (megabytes) are paid for and fetched again later.
    public var abandonedRequestReadAhead: Int64 = 4 << 20
    /// How long an abandoned origin request keeps taking what arrives (up to `abandonedRequestReadAhead`) before
    /// it stops (default 0.25 s; what arrived is kept, as whole chunks and spans). Bounds what it fetches that the player may
    /// never read to what the origin sends in that time: measured with `tools/bench --only originbytes` (a
    /// player that seeks past what it dropped, from a 2 MiB/s origin), a read-ahead of 4 MiB without this bound
    /// took 1.44-1.53x the bytes played from the origin; stopping at the chunk at once wasted a fast origin's
    /// bytes in transit (`OriginBytesOnceTests`, 1.53x of the object).
    public var abandonedRequestGrace: Duration = .milliseconds(250)
    /// Bytes read from the cache's files that the reads of this reader may have in progress at once (default
    /// 32 MiB): a piece takes its share (the bytes it was read from: whole chunks, or only the 16 KiB blocks it
    /// needs) until its consumer asks for the next piece. Bounds the reads running ahead of their consumers
    /// under many concurrent readers of cached objects: past it, reads wait in the order they came (measured
    /// with `tools/bench --only serve`).
    public var cacheReadBudget: Int64 = 32 << 20
    /// How long an object that this reader only read from the cache (no origin fetch ran on it) stays open
    /// after its last read (default zero: closed at once). A server answering many short reads of the same
    /// objects sets it (the proxy: 1 s), so that each read does not open and close the object's files. While
    /// open, the object is busy for other processes (a compactor skips it, `cache-fsck` does not read its
    /// chunks); this process's `MediaCache.remove`, `removeAll`, `pin` and `unpin` close it first. Objects a
    /// fetch wrote to are closed (committed) at once, whatever this says.
    public var idleSessionLinger: Duration = .zero
    /// Retries after a connection error, a 5xx or a cut-off body (default 3).
    public var maxRetries = 3
    /// First backoff, seconds; doubled per retry, plus up to 50% jitter (default 0.2).
    public var retryBaseDelay: Duration = .milliseconds(200)
    /// The most bytes per second all background responses of this reader take from origins together (nil,
    /// the default: no limit), with bursts of a quarter second; a player's reads are never slowed, and a
    /// background request a player joins is not slowed from then on.
    public var backgroundBytesPerSecond: Int64?

    /// A configuration with the given limits (the defaults are documented on each property). Call `validate()`
    /// to check them.
    public init(
      maxForegroundRequests: Int? = nil, maxBackgroundRequestsPerHost: Int = 6,
      abandonedRequestReadAhead: Int64 = 4 << 20, abandonedRequestGrace: Duration = .milliseconds(250),
      maxRetries: Int = 3,
      retryBaseDelay: Duration = .milliseconds(200), originRequestWindow: Int64 = 0
    ) {
      self.originRequestWindow = originRequestWindow
      self.abandonedRequestGrace = abandonedRequestGrace
      self.maxForegroundRequests = maxForegroundRequests
      self.maxBackgroundRequestsPerHost = maxBackgroundRequestsPerHost
      self.abandonedRequestReadAhead = abandonedRequestReadAhead
      self.maxRetries = maxRetries
      self.retryBaseDelay = retryBaseDelay
    }

    /// Throws `ConfigurationError.invalidLimit` for a limit below 1 (or a negative read-ahead), naming it.
    public func validate() throws {
      if let cap = maxForegroundRequests, cap < 1 {
        throw ConfigurationError.invalidLimit(name: "maxForegroundRequests", value: Int64(cap))
      }
      if maxBackgroundRequestsPerHost < 1 {
        throw ConfigurationError.invalidLimit(
          name: "maxBackgroundRequestsPerHost", value: Int64(maxBackgroundRequestsPerHost))
      }
      if abandonedRequestGrace < .zero {
        throw ConfigurationError.invalidLimit(name: "abandonedRequestGrace", value: -1)
      }
      if originRequestWindow < 0 {
        throw ConfigurationError.invalidLimit(name: "originRequestWindow", value: originRequestWindow)
      }
      if let rate = backgroundBytesPerSecond, rate < 1 {
        throw ConfigurationError.invalidLimit(name: "backgroundBytesPerSecond", value: rate)
      }
      if abandonedRequestReadAhead < 0 {
        throw ConfigurationError.invalidLimit(
          name: "abandonedRequestReadAhead", value: abandonedRequestReadAhead)
      }
    }
  }

  /// A `Configuration` value that cannot work.
  public enum ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `name` was given `value`; limits must be at least 1 (a read-ahead at least 0).
    case invalidLimit(name: String, value: Int64)

    /// The limit and the value it was given, in one line.
    public var description: String {
      switch self {
      case .invalidLimit(let name, let value):
        "CachingReader.Configuration.\(name) is \(value): a limit must be at least 1 (a read-ahead at least 0)"
      }
    }
  }

  /// The cache bytes are read from and written to.
  public let cache: MediaCache
  /// The HTTP client that fetches missing bytes from origins.
  public let client: OriginClient
  /// Limits and retries of this reader.
  public let configuration: Configuration
  let scheduler: RequestScheduler
  /// The objects this reader has open, and what their sessions are given instead of this reader.
  let registry: SessionRegistry
  let environment: SessionEnvironment

  /// A reader over `cache` fetching through `client`. Readers of one process with the same request limits
  /// share one request scheduler (so the limits hold for the process, not per reader).
  ///
  /// `backgroundActivityLogger` gets what the reader does that no caller waits for: retries of origin requests
  /// (debug) and commits that fail when an object closes after its last read (error). By default nothing is
  /// logged (as AsyncHTTPClient's `backgroundActivityLogger`).
  public init(
    cache: MediaCache, client: OriginClient = OriginClient(), configuration: Configuration = Configuration(),
    backgroundActivityLogger: Logger = CachingReader.silentLogger
  ) {
    self.cache = cache
    self.client = client
    self.configuration = configuration
    Self.installEventLoopCheck
    let scheduler = RequestScheduler.shared(
      maxForeground: configuration.maxForegroundRequests,
      maxBackgroundPerHost: configuration.maxBackgroundRequestsPerHost)
    self.scheduler = scheduler
    let registry = SessionRegistry(cache: cache, linger: configuration.idleSessionLinger)
    self.registry = registry
    if configuration.idleSessionLinger > .zero {
      cache.closing.addIdleHolder { [weak registry] id in registry?.closeIdle(id) }
    }
    self.environment = SessionEnvironment(
      cache: cache, client: client, scheduler: scheduler, registry: registry,
      maxRetries: configuration.maxRetries, retryBaseDelay: configuration.retryBaseDelay,
      abandonedRequestReadAhead: configuration.abandonedRequestReadAhead,
      abandonedRequestGrace: configuration.abandonedRequestGrace,
      originRequestWindow: configuration.originRequestWindow, logger: backgroundActivityLogger,
      readBudget: ReadBudget(limit: configuration.cacheReadBudget),
      // A few large buffers: every one kept is memory held for good (with 16, as many chunk pairs as the
      // budget lets reads hold, the proxy's peak RSS after cached GETs went from ~45 to 78 MiB; 2 instead of 4
      // saved ~3.5 MiB and cost 15% of 1 MiB hits per second). Small ones, 1 MiB per size: 4 MiB per size
      // added ~4 MiB to a cold stream's peak RSS, and did not serve 64 KiB hits measurably faster.
      bufferPool: ByteBufferPool(largeKept: 4, smallBytesPerSize: 1 << 20),
      backgroundRate: configuration.backgroundBytesPerSecond.map(BackgroundRateLimit.init))
  }

  /// A logger that drops everything: the default `backgroundActivityLogger`.
  public static let silentLogger = Logger(label: "MediaCacheHTTP", factory: { _ in SwiftLogNoOpLogHandler() })

  /// Tells `BlockingCallCheck` that an event loop is no place for a blocking call (once per process).
  private static let installEventLoopCheck: Void = BlockingCallCheck.setForbiddenThreadTest {
    MultiThreadedEventLoopGroup.currentEventLoop != nil
  }

  // MARK: Reading

  /// The bytes of `range` of the object at `url`, in order, as an async sequence of pieces (at most a chunk
  /// each). The object's length is known once this returns (`CachedBytes.length`).
  ///
  /// Throws `OriginError` for origin failures and `StoreError` for cache failures; a range that starts past the
  /// end throws `OriginError.rangeNotSatisfiable`.
  ///
  /// `priority` says who waits for the bytes: `.foreground` (the default: a player) never waits for a request
  /// slot held by another object or by background work; `.background` is limited per origin host and yields.
  public func read(_ url: String, range: RequestedRange = .all, priority: ReadPriority = .foreground)
    async throws -> CachedBytes
  {
    try await read(url, range: range, priority: priority, after: nil)
  }

  /// `read(_:range:priority:)`, as a later read of one request (`earlier`, its read before, already closed: the
  /// proxy reads the whole object after an `If-Range` that does not match or an open range of unknown length,
  /// a playlist whole, a response begun again after its object changed): it goes by what was at hand when the
  /// request began (`BytesAtHand`), so the bytes the request's own first read brought, written or still being
  /// written, count as fetched for it.
  package func read(
    _ url: String, range: RequestedRange = .all, priority: ReadPriority = .foreground,
    after earlier: CachedBytes?
  ) async throws -> CachedBytes {
    try OriginClient.validate(url)
    let session = try await registry.openSession(url, environment: environment)
    do {
      // Stale bytes are revalidated before anything is read (RFC 9111 4.3); a new version resets the object.
      var revalidation = try await session.revalidateIfStale()
      if revalidation == .notNeeded, session.mayHaveGrown(past: range) {
        revalidation = try await session.revalidateIfStale(evenIfFresh: true)
      }
      // Bytes still being written are looked at before the manifest: once their write is over, the manifest
      // lists them (a read that opens right after another's response ended, its first bytes handed over while
      // written, finds them in one or the other, and counts them as cached: found by CI, 2026-12-07).
      let inFlight = session.bytesBeingWritten()
      let manifest = session.manager.manifest
      let atHand =
        if let earlier {
          BytesAtHand(manifest: manifest, inFlight: inFlight, after: earlier.atHandAtOpen)
        } else {
          BytesAtHand(manifest: manifest, inFlight: inFlight)
        }
      let (resolved, flight, length) = try await resolve(range, session: session, priority: priority)
      // The flight that learned the length may have found another version (or another reader's did).
      return CachedBytes(
        session: session, range: resolved, initialFlight: flight, lengthHint: length,
        atHandAtOpen: atHand.reset(to: session.manager.manifest), priority: priority,
        revalidation: revalidation)
    } catch {
      session.endRead()
      throw error
    }
  }

  /// `read(_:range:priority:)` for a `URL`.
  public func read(_ url: URL, range: RequestedRange = .all, priority: ReadPriority = .foreground)
    async throws -> CachedBytes
  {
    try await read(url.absoluteString, range: range, priority: priority)
  }

  /// Turns a requested range into absolute bytes, learning the length from the origin if the cache does not
  /// know it yet (from the first missing run's response, or a HEAD for a suffix).
  /// Also returns the flight started to learn the length, still attached (the read's first cursor takes it
  /// over), and the length as learned (a suffix read learns it from a probe the cache does not record).
  private func resolve(_ range: RequestedRange, session: ObjectSession, priority: ReadPriority)
    async throws -> (
      Range<Int64>, Flight?, Int64?
    )
  {
    var length = session.manager.contentLength
    var started: Flight?
    if length == nil {
      var start: Int64 = 0
      var end: Int64?
      switch range {
      case .bounded(let bounds) where bounds.isEmpty: return (bounds, nil, nil)
      case .bounded(let bounds): (start, end) = (bounds.lowerBound, bounds.upperBound)
      case .from(let from): start = from
      case .all: break
      case .suffix(let count):
        let head = try await client.probe(session.url)
        guard let total = head.length else {
          throw OriginError.inconsistentResponse(
            url: session.url, reason: "origin gives no length for a suffix range")
        }
        length = total
        start = max(0, total - count)
      }
      // The first bytes' flight, waited for until the origin's head is in, so the response's head has the
      // object's validators and type (a suffix's probe is not recorded). A chunk completed meanwhile gives no
      // flight: unless the length is known, one is needed. A prefetch waits for its runs: not windowed.
      let windowed = priority == .foreground
      let hasBytes = length.map { start < $0 } ?? true  // not an empty suffix
      var flight =
        hasBytes ? await session.flight(for: start, upTo: end, priority: priority, windowed: windowed) : nil
      if flight == nil, session.manager.contentLength == nil, hasBytes {
        flight = await session.flight(
          for: start, upTo: end, priority: priority, evenIfCached: true, windowed: windowed)
      }
      var isEmpty = false
      if let flight {
        do {
          _ = try await flight.waitForHead()
        } catch let error as OriginError where start == 0 && error.kind.isRangeOfEmptyObject {
          // An origin answers a range of an empty representation with 416 and `bytes */0` (RFC 9110 14.1.1:
          // no range of it is satisfiable): the object is empty now, and a read of it whole is a 200 of no
          // bytes. Not recorded: the 416 carries nothing to judge its freshness by, and a file empty for a
          // moment (a segment being written) must not stay empty in the cache; the next read asks again.
          flight.detach()
          isEmpty = true
        } catch {
          flight.detach()
          throw error
        }
      }
      started = isEmpty ? nil : flight
      length = isEmpty ? 0 : session.manager.contentLength ?? length
    }
    do {
      return (try bounds(of: range, length: length, url: session.url), started, length)
    } catch {
      started?.detach()
      throw error
    }
  }

  private func bounds(of range: RequestedRange, length: Int64?, url: String) throws -> Range<Int64> {
    if case .bounded(let bounds) = range, bounds.isEmpty { return bounds }
    guard let length else {
      // Only a suffix needs the length first (`resolve` probes for it); the rest ends where the object ends.
      switch range {
      case .bounded(let bounds): return bounds
      case .from(let start): return start..<Int64.max
      default: return 0..<Int64.max
      }
    }
    guard let resolved = range.resolved(length: length) else {
      let text =
        switch range {
        case .all: "0-"
        case .bounded(let bounds): "\(bounds.lowerBound)-\(bounds.upperBound - 1)"
        case .from(let start): "\(start)-"
        case .suffix(let count): "-\(count)"
        }
      throw OriginError.rangeNotSatisfiable(url: url, range: text, length: length)
    }
    return resolved
  }

  /// The objects this reader is fetching from an origin now, with the number of origin requests (flights)
  /// running for each: what an operator's dashboard lists as live fetches.
  public var liveOriginFetches: [ObjectID: Int] { registry.flightsByObject }

  /// This reader's reads waiting for bytes an origin has not sent yet, of requests a player waits for (a
  /// stalled player). `Preloader` does not start its next fetch while there are any.
  public var playersWaitingForOrigin: Int { environment.playerWaits.count }

  /// Whether one of this reader's players is waiting for an origin now or stopped waiting less than `window`
  /// ago: a player reading at the origin's pace waits again a moment after each piece, and background work must
  /// not slip into those moments.
  public func playerWaitedForOrigin(within window: Duration) -> Bool {
    environment.playerWaits.waited(within: window)
  }

  /// Cancels every origin request this reader has running; readers waiting on them get `CancellationError`.
  public func cancelAll() async {
    for session in registry.openSessions() { await session.cancelAll() }
  }

  /// Closes the objects kept open after their last read (`Configuration.idleSessionLinger`) now, and returns
  /// once they are closed.
  public func closeIdleObjects() async {
    registry.closeIdle(nil)
    await cache.closing.waitForAll()
  }

  /// For a process about to exit once its reads have ended (`mediacache proxy` after its connections drained,
  /// `fetch`): cancels the origin requests still running (what arrived is kept), waits up to `timeout` for
  /// their objects to be let go (a read still holding one keeps it open), closes every object nothing uses and
  /// returns once those closes have committed. `closeIdleObjects` alone misses an object whose flight is still
  /// ending after its last read left (its close begins only when the flight ends): a process exiting then
  /// loses what that flight fetched since the last commit.
  ///
  /// Work started meanwhile (a read, a preload) is cancelled too, on each look; stop whatever starts it first
  /// (`Preloader.stopAndWait`). A cancelled calling task does not cut the wait short: the commits are the
  /// point of the call.
  public func finishOpenObjects(within timeout: Duration = .seconds(5)) async {
    let deadline = ContinuousClock.now + timeout
    while true {
      await cancelAll()
      registry.closeIdle(nil)
      if registry.isQuiet || ContinuousClock.now >= deadline { break }
      // Detached, so that a cancelled caller still waits (its own sleep would return at once).
      await Task.detached { try? await Task.sleep(for: .milliseconds(5)) }.value
    }
    await cache.closing.waitForAll()
  }
}
