import Foundation
import MediaCacheTestSupport

/// An object of the soak's working set: the test origin's `normal` mode object `name` of `size` bytes.
struct SoakObject: Sendable {
  let name: String
  let size: Int
  /// `http://127.0.0.1:PORT/normal/<name>?size=<size>` (the test origin), or `https://` and the HTTPS
  /// origin's port (the same object through `SoakTLSOrigin`).
  let url: String
  /// The proxy's path form of `url`.
  var target: String {
    url.hasPrefix("https://")
      ? "/https/" + url.dropFirst("https://".count) : "/http/" + url.dropFirst("http://".count)
  }
  var isHTTPS: Bool { url.hasPrefix("https://") }
}

/// What the players play and where.
struct SoakWorld: Sendable {
  let proxyPort: Int
  /// Progressive objects (MP4-like files read by ranges), most popular first.
  let objects: [SoakObject]
  /// The HLS media playlist's and the MPD's request targets on the proxy.
  let playlistTarget: String
  let mpdTarget: String
  let deadline: Double
  let stop: StopFlag
  let tally: SoakTally

  var running: Bool { !stop.isSet && monotonicSeconds() < deadline }

  /// The request target for a URI found in a playlist or MPD fetched as `base`: a proxy URL keeps its path, an
  /// origin URL takes the path form, a relative reference resolves against `base` (RFC 3986, dot segments
  /// removed).
  func target(forURI uri: String, base: String) -> String {
    let proxyPrefix = "http://127.0.0.1:\(proxyPort)"
    if uri.hasPrefix(proxyPrefix + "/") { return String(uri.dropFirst(proxyPrefix.count)) }
    if uri.hasPrefix("http://") { return "/http/" + uri.dropFirst("http://".count) }
    if uri.hasPrefix("https://") { return "/https/" + uri.dropFirst("https://".count) }
    if uri.hasPrefix("/") { return uri }
    let directory = base.split(separator: "?", maxSplits: 1)[0].split(
      separator: "/", omittingEmptySubsequences: false
    )
    .dropLast()
    var segments: [Substring] = []
    let (path, query) = uri.firstIndex(of: "?").map { (uri[..<$0], uri[$0...]) } ?? (uri[...], "")
    for segment in directory + path.split(separator: "/", omittingEmptySubsequences: false) {
      switch segment {
      case ".": continue
      case "..": if segments.count > 1 { segments.removeLast() }
      default: segments.append(segment)
      }
    }
    return segments.joined(separator: "/") + query
  }

  /// The origin object a target names (`…/normal/<name>?size=<size>`).
  static func object(inTarget target: String) -> (name: String, size: Int)? {
    guard let mode = target.range(of: "/normal/"), let query = target.range(of: "?size=") else { return nil }
    let name = String(target[mode.upperBound..<query.lowerBound])
    guard let size = Int(target[query.upperBound...].prefix { $0.isNumber }) else { return nil }
    return (name, size)
  }
}

/// Runs player `index` until the soak ends: 3 of 4 players read progressive objects by ranges (sequential
/// reads, open-ended reads abandoned mid-body, seeks, suffix ranges, whole GETs), the rest play the HLS playlist
/// or the MPD's segments in order from a random one, some abandoned half-way. Every body byte is checked.
func soakPlayer(_ index: Int, world: SoakWorld, seed: UInt64) {
  var random = SeededRandom(seed: seed)
  while world.running {
    switch index % 8 {
    case 6: playSegments(kind: "hls", manifest: world.playlistTarget, world: world, random: &random)
    case 7: playSegments(kind: "dash", manifest: world.mpdTarget, world: world, random: &random)
    default: playProgressive(world: world, random: &random)
    }
    sleepSeconds(random.seconds(0.05...0.3))
  }
}

/// Plays one progressive object: a handful of reads from the start or a seek point.
private func playProgressive(world: SoakWorld, random: inout SeededRandom) {
  // Skewed popularity: the first objects are asked for most.
  let pick = Double.random(in: 0..<1, using: &random)
  let object = world.objects[min(world.objects.count - 1, Int(pick * pick * Double(world.objects.count)))]
  let size = Int64(object.size)
  var position: Int64 = Bool.random(using: &random) ? 0 : Int64.random(in: 0..<size, using: &random)
  for _ in 0..<Int.random(in: 1...10, using: &random) where world.running && position < size {
    var request = SoakRequest(target: object.target, object: (object.name, object.size))
    let choice = Int.random(in: 0..<100, using: &random)
    switch choice {
    case 0..<50:
      let length = Int64.random(in: 64_000...2_000_000, using: &random)
      request.range = "bytes=\(position)-\(min(size, position + length) - 1)"
      position += length
    case 50..<72:
      request.range = "bytes=\(position)-"
      request.abandonAfter = Int64.random(in: 100_000...3_000_000, using: &random)
      position += request.abandonAfter!
    case 72..<87:
      position = Int64.random(in: 0..<size, using: &random)
      let length = Int64.random(in: 1...1_500_000, using: &random)
      request.range = "bytes=\(position)-\(min(size, position + length) - 1)"
      position += length
    case 87..<95:
      request.abandonAfter = Bool.random(using: &random) ? Int64.random(in: 1...size, using: &random) : nil
      position = size
    default:
      request.range = "bytes=-\(Int64.random(in: 1...400_000, using: &random))"
    }
    let result = soakGet(port: world.proxyPort, request)
    world.tally.record("progressive", request, result)
    if result.failure != nil { break }
    sleepSeconds(random.seconds(0.02...0.08))
  }
}

/// Fetches the playlist or MPD, then its media segments in order from a random one; a quarter of the sessions
/// abandon one segment half-way and stop.
private func playSegments(kind: String, manifest: String, world: SoakWorld, random: inout SeededRandom) {
  let listing = SoakRequest(target: manifest)
  let result = soakGet(port: world.proxyPort, listing)
  world.tally.record("manifest", listing, result)
  guard result.complete else { return }
  let text = String(decoding: result.body, as: UTF8.self)
  let uris: [String]
  if kind == "hls" {
    uris = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
      .filter { !$0.isEmpty && !$0.hasPrefix("#") }
  } else {
    uris = text.components(separatedBy: "media=\"").dropFirst().compactMap {
      $0.split(separator: "\"", maxSplits: 1).first.map { $0.replacingOccurrences(of: "&amp;", with: "&") }
    }
  }
  let targets = uris.map { world.target(forURI: $0, base: manifest) }
  guard !targets.isEmpty, targets.allSatisfy({ SoakWorld.object(inTarget: $0) != nil }) else {
    world.tally.problem(
      "\(kind) \(manifest): segments \(uris.prefix(3)) do not name origin objects: \(text.prefix(300))")
    return
  }
  let abandonAt =
    Int.random(in: 0..<4, using: &random) == 0 ? Int.random(in: 0..<targets.count, using: &random) : nil
  for index in Int.random(in: 0..<targets.count, using: &random)..<targets.count where world.running {
    let object = SoakWorld.object(inTarget: targets[index])!
    var request = SoakRequest(target: targets[index], object: object)
    if index == abandonAt { request.abandonAfter = Int64(object.size / 2) }
    let result = soakGet(port: world.proxyPort, request)
    world.tally.record(kind, request, result)
    if result.failure != nil || result.abandoned { return }
    sleepSeconds(random.seconds(0.05...0.2))
  }
}
