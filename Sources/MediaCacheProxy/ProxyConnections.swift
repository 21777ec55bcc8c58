import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Synchronization

/// The open connections of a running server and its responses in progress, so it can stop taking new
/// requests, let the current responses finish, and cut what is left.
final class ProxyConnections: Sendable {
  private struct State {
    var channels: [ObjectIdentifier: any Channel] = [:]
    var responses = 0
    var draining = false
    var drained: [CheckedContinuation<Void, Never>] = []

    mutating func takeDrainedIfIdle() -> [CheckedContinuation<Void, Never>] {
      guard draining, channels.isEmpty, responses == 0 else { return [] }
      defer { drained = [] }
      return drained
    }
  }
  private let state = Mutex(State())

  func opened(_ channel: any Channel) {
    state.withLock { $0.channels[ObjectIdentifier(channel)] = channel }
    channel.closeFuture.whenComplete { [self] _ in
      resume(
        state.withLock { state in
          state.channels[ObjectIdentifier(channel)] = nil
          return state.takeDrainedIfIdle()
        })
    }
  }

  func responseStarted() { state.withLock { $0.responses += 1 } }

  func responseEnded() {
    resume(
      state.withLock { state in
        state.responses -= 1
        return state.takeDrainedIfIdle()
      })
  }

  /// Asks every connection to close once its current response is written (idle ones close at once), and
  /// returns when all connections are closed and every response task has ended.
  func drain() async {
    await withCheckedContinuation { continuation in
      let channels = state.withLock { state -> [any Channel] in
        state.draining = true
        state.drained.append(continuation)
        return Array(state.channels.values)
      }
      for channel in channels { channel.pipeline.fireUserInboundEventTriggered(ProxyQuiesceEvent()) }
      resume(state.withLock { $0.takeDrainedIfIdle() })
    }
  }

  /// Closes every connection now (their response tasks are cancelled as they close).
  func closeAll() {
    for channel in state.withLock({ Array($0.channels.values) }) { channel.close(promise: nil) }
  }

  private func resume(_ waiters: [CheckedContinuation<Void, Never>]) {
    for waiter in waiters { waiter.resume() }
  }
}
