import Foundation
import MediaCache
import MediaCacheTestSupport

/// SIGKILL of `mediacache proxy` while three clients read overlapping ranges of slow objects through it; every
/// byte a client received (before the kill too) must be the origin's. A restarted proxy then serves every object
/// whole and leaves it complete in the cache.
func proxyKillTrial(_ context: TrialContext, _ environment: Environment) {
  var random = SeededRandom(seed: context.seed)
  let log = CommandLog(directory: context.directory)
  let root = "\(context.directory)/cache"
  let checks = Checks(context: context, binaries: environment.binaries, log: log, root: root)
  let durability = Bool.random(using: &random) ? "durable" : "relaxed"
  var objects: [OriginObject] = []
  for index in 0..<3 {
    let size = Int.random(in: 300_000...5_000_000, using: &random)
    let delay = max(1, Int(1500.0 / Double(size / 16_384 + 1)))
    let name = "pk-\(context.trial)-\(index)-\(random.token())"
    objects.append(
      OriginObject(
        name: name, size: size,
        url: environment.origin.url(.slow, name, size: size, query: "delay-ms=\(delay)")))
  }
  let kills = Int.random(in: 1...2, using: &random)
  for round in 0..<kills {
    let proxy: ProxyProcess
    do {
      proxy = try ProxyProcess.start(
        environment.binaries, cache: root, extra: ["--durability", durability], log: log)
    } catch {
      return context.fail("round \(round): \(error)")
    }
    let stop = StopFlag()
    let group = DispatchGroup()
    let clientSeeds = (0..<3).map { _ in random.next() }
    for client in 0..<3 {
      let seed = clientSeeds[client]
      let allObjects = objects
      DispatchQueue.global().async(group: group) {
        var random = SeededRandom(seed: seed)
        while !stop.isSet {
          let object = allObjects.randomElement(using: &random)!
          var range: Range<Int64>?
          if Bool.random(using: &random) {
            let start = Int64.random(in: 0..<Int64(object.size), using: &random)
            range = start..<min(Int64(object.size), start + Int64.random(in: 1...2_000_000, using: &random))
          }
          let result = proxyGet(port: proxy.port, object, range: range)
          context.tally.verified(result.bodyBytes)
          context.tally.count("proxy body bytes verified", result.bodyBytes)
          if let wrong = result.wrongByteAt {
            context.fail("round \(round): the proxy sent a wrong byte of \(object.name) at offset \(wrong)")
          }
          if result.status == nil { usleep(20_000) }  // killed: nothing listens until the driver moves on
          if result.complete {
            context.tally.count("proxy responses complete")
          } else if result.bodyBytes > 0 {
            context.tally.count("proxy responses cut mid-body")
          }
          if let status = result.status, status != 200 && status != 206 {
            context.fail("round \(round): status \(status) for \(object.name) \(String(describing: range))")
          }
        }
      }
    }
    let after = random.seconds(0.2...2.2)
    sleepSeconds(after)
    if proxy.child.killNow(log: log, started: monotonicSeconds() - after) {
      context.tally.fault()
    } else {
      context.fail(
        "round \(round): the proxy ended before the kill: \(proxy.child.poll()!) \(proxy.child.stderrText)")
    }
    stop.set()
    group.wait()
    let when = "after kill \(round + 1) of \(kills) at \(String(format: "%.3f", after)) s"
    checks.auditAll(objects, when: when)
    checks.fsckCheck(allowed: ["orphan-data"], when: when)
  }

  // The restart serves every object whole, from the cache and the origin, and completes it.
  let proxy: ProxyProcess
  do {
    proxy = try ProxyProcess.start(
      environment.binaries, cache: root, extra: ["--durability", durability], log: log)
  } catch {
    return context.fail("restart: \(error)")
  }
  for object in objects {
    let result = proxyGet(port: proxy.port, object, range: nil)
    context.tally.verified(result.bodyBytes)
    if !result.complete || result.wrongByteAt != nil {
      context.fail("restart: GET \(object.name): \(result)")
    }
  }
  proxy.child.signal(SIGTERM)
  let outcome = proxy.child.wait(timeout: 30)
  if outcome != .exited(0) {
    context.fail("restart: the proxy ended \(outcome) after SIGTERM: \(proxy.child.stderrText)")
  }
  let audits = checks.auditAll(objects, when: "after the restart")
  for object in objects where audits[object.name]?.manifest?.isComplete != true {
    context.fail("after the restart \(object.name) is not complete")
  }
  checks.catCheck(objects[0], nil, when: "after the restart")
  checks.fsckCheck(allowed: [], requireClean: true, when: "after the restart")
  checks.securityScan(objects, when: "after the restart")
}
