import MediaCache
import NIOCore

/// The request targets one event loop resolved lately (`ProxyResponder.resolvedTarget`), each with the origin
/// URL it names and that URL's object id: a request of a target seen before skips the parse and check of the
/// URL and the SHA-256 of its key, whether the loop answers it (`ProxyResponder.hitNow`) or a task does
/// (together about 8% of the proxy's CPU answering random 64 KiB ranges; docs/PERFORMANCE.md, Step 10). A target
/// seen first is still checked once on the loop (~0.05 ms, cold, on a miss's path). A loop past its
/// connections for answering hits (`LoopHitPolicy`) resolves targets too: once per target, against a lookup per
/// request after it, so that its tasks skip the same work (2-7% of the CPU per 1 MiB hit at 256 connections).
///
/// Only what a target alone decides is kept: the mapping from a target to its origin URL is fixed for the life
/// of the server (its allowed hosts and upstreams do not change), and the cache's key function is a function of
/// the URL (`KeyFunction`). Everything that depends on the request's fields (its method, `Range`, conditionals)
/// or on the cache's state is checked per request as before (but the check for a playlist of a content type a
/// hit of the target was already answered with, `Target.answered`). At most `capacity` targets are kept; when
/// full, the memo starts again empty (a loop serving many objects loses at most one check per target and
/// round), and a target longer than `maxTargetBytes` is not kept (resolved again each time), so the memo holds
/// at most `capacity` times that.
final class LoopTargetMemo: @unchecked Sendable {
  /// What a target names.
  struct Target {
    /// The origin URL, checked (`ProxyResponder.target(of:)`).
    let origin: String
    /// The object `origin` is cached under.
    let objectID: ObjectID
    /// The content type a hit of it on this loop was answered with (nil: none known). A hit with the same
    /// one is not a playlist: `ProxyResponder.mayBePlaylist` depends on that type and `origin` alone.
    var answered: AnsweredType? = nil
  }

  /// A content type a hit was answered with (`value` nil: the origin sent none).
  struct AnsweredType: Equatable {
    let value: String?
  }

  /// The most targets kept.
  static let capacity = 1024
  /// The longest target kept, in bytes (a request head may be up to 80 KiB).
  static let maxTargetBytes = 2048

  // Used only on `loop`.
  private let loop: any EventLoop
  private var targets: [String: Target] = [:]

  init(loop: any EventLoop) {
    self.loop = loop
  }

  /// What `uri` named when it was last remembered, or nil.
  func target(for uri: String) -> Target? {
    loop.preconditionInEventLoop()
    return targets[uri]
  }

  /// What `uri` names: as remembered, else as `resolve` says (remembered when it says something).
  func target(for uri: String, resolving resolve: () -> Target?) -> Target? {
    if let known = target(for: uri) { return known }
    guard let resolved = resolve() else { return nil }
    remember(resolved, for: uri)
    return resolved
  }

  /// Remembers what `uri` names, unless it is longer than `maxTargetBytes`.
  func remember(_ target: Target, for uri: String) {
    loop.preconditionInEventLoop()
    guard uri.utf8.count <= Self.maxTargetBytes else { return }
    if targets.count >= Self.capacity { targets.removeAll(keepingCapacity: true) }
    targets[uri] = target
  }
}
