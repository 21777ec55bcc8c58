import Synchronization

/// What the soak's players saw, shared by their threads.
final class SoakTally: Sendable {
  struct State {
    var requests: [String: Int64] = [:]
    var complete: Int64 = 0
    var abandoned: Int64 = 0
    var bytesVerified: Int64 = 0
    var wrongBytes: Int64 = 0
    /// Failed requests by `<fault>: <how>`.
    var explained: [String: Int64] = [:]
    var unexplained: Int64 = 0
    /// The first unexplained failures and wrong bytes, in full.
    var problems: [String] = []
    /// Time to the response head of every request that got one: (start, seconds).
    var headTimes: [(start: Double, seconds: Double)] = []
  }
  private let state = Mutex(State())
  let timeline: SoakTimeline

  init(timeline: SoakTimeline) { self.timeline = timeline }

  var snapshot: State { state.withLock { $0 } }

  /// Records one request of `kind` (`progressive`, `hls`, `dash`, `playlist`) and judges its outcome.
  func record(_ kind: String, _ request: SoakRequest, _ result: SoakResult) {
    let explanation = result.failure.map {
      timeline.explain($0, object: request.object?.name, started: result.started, ended: result.ended)
    }
    state.withLock { state in
      state.requests[kind, default: 0] += 1
      if let headAt = result.headAt { state.headTimes.append((result.started, headAt - result.started)) }
      if request.object != nil { state.bytesVerified += result.bodyBytes }
      if result.complete { state.complete += 1 }
      if result.abandoned { state.abandoned += 1 }
      if let wrong = result.wrongByteAt {
        state.wrongBytes += 1
        state.problems.append(
          "WRONG BYTE: \(request.target) \(request.range ?? "") at object offset \(wrong) (ETag version "
            + "\(result.version.map(String.init) ?? "-"), from \(result.started) to \(result.ended))")
        return
      }
      guard let failure = result.failure else { return }
      if let explanation, let kind = explanation {
        state.explained["\(kind.rawValue): \(failure.rawValue)", default: 0] += 1
      } else {
        state.unexplained += 1
        if state.problems.count < 50 {
          state.problems.append(
            "unexplained \(failure.rawValue): \(request.target) \(request.range ?? "") "
              + "(\(result.detail)) from \(result.started) to \(result.ended)")
        }
      }
    }
  }

  func problem(_ text: String) {
    state.withLock { state in
      state.unexplained += 1
      state.problems.append(text)
    }
    log("SOAK FAIL \(text)")
  }
}
