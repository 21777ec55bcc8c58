import NIOCore

// Background work yields to players: a background flight's next body part waits while a player of the same
// reader waits for an origin.
extension BodyWriter {
  /// The longest a background flight's next part waits for players to stop waiting: if a player's count were
  /// ever wrong, background work would slow down, never stop.
  static let longestPause = TimeAmount.seconds(2)

  /// How long after a player's wait ends the pause holds: a player reading a slow origin stops waiting for a
  /// moment at each piece it gets, and a loaded machine may take a while to schedule its next wait; without the
  /// linger, background work would run in those gaps from what its socket buffered meanwhile.
  static let pauseLinger = Duration.milliseconds(250)

  /// Succeeds once no player of `waits` has waited for an origin for `pauseLinger` (checked every 50 ms), once
  /// `flight` is promoted (a player joined it: it is that player's wait now), or at `deadline`.
  static func whilePlayersWait(
    _ waits: PlayerWaits, flight: Flight, on eventLoop: any EventLoop, until deadline: NIODeadline
  ) -> EventLoopFuture<Void> {
    guard waits.waited(within: pauseLinger), flight.isBackground.load(ordering: .relaxed),
      NIODeadline.now() < deadline
    else {
      return eventLoop.makeSucceededVoidFuture()
    }
    return eventLoop.scheduleTask(in: .milliseconds(50)) {}.futureResult.flatMap {
      whilePlayersWait(waits, flight: flight, on: eventLoop, until: deadline)
    }
  }
}
