/// How large the pieces a consumer of `CachedBytes` reads may be, and what a read from the cache counts while
/// it runs: the proxy bounds the memory its responses hold this way (`QueuedBytes`). A read from the cache is
/// counted before it starts, so that many reads starting at once (256 players opening together) see the bound
/// they fill together; a read that waits for an origin's bytes counts nothing while it waits (those bytes are
/// the flight's buffers, which exist anyway), so that slow origins do not fill the bound.
package protocol PieceSizing: Sendable {
  /// The largest piece to take now, of bytes not read from the cache (the flight's memory, an origin's).
  var pieceLimit: Int { get }
  /// Before a read from the cache of up to `wanted` bytes (what is cached from the read's position, at most two
  /// chunks of the object's): the largest piece it may read, and what was counted for it, given back with
  /// `release` once the read returned (the consumer counts the piece itself from there).
  func reserveRead(wanted: Int) -> (atMost: Int, reserved: Int)
  /// Gives back what `reserveRead` counted.
  func release(_ reserved: Int)
}
