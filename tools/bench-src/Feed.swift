// `feed`: a short-video feed played through the proxy by a scripted user, with one preloading strategy.
//
//   mediacache-bench feed --list FILE --media DIR --proxy URL --origin URL
//                         --strategy none|whole|preloader [--seed S] [--speedup X]
//       FILE lists the feed, one item a line: "mp4 PATH" or "hls PATH" (PATH under DIR and under the origin's
//       URL; an HLS item is its media playlist, TS segments beside it). What a player reads to play t seconds
//       comes from the local files: for an MP4, its ftyp and moov boxes and its mdat from the start up to the
//       end of the last packet before t (ffprobe's packet offsets); for HLS, the playlist and every segment that
//       starts before t, whole.
//
//       The user (seeded): on each item the player reads what the first frame needs (t = 0.1 s; timed: "start"),
//       then the user skips after 1 s (40%), watches 5–10 s (40%) or to the end (20%); the player reads what
//       those seconds need and the user stays for that time divided by --speedup (default 5), or 1 s if that
//       is longer (a skip is not compressed). The first item's start is left out of the figures: no strategy
//       can preload it. Strategies:
//       none; whole (on each start, the client downloads the whole next item through the proxy in 256 KiB
//       ranges, stopped when the user moves on); preloader (PUT /preload with the feed and the current index
//       on each move: the proxy's Preloader with its default policy, 5 s, 2 s, 2 s).
//
//       Prints one line per start and "feed: STRATEGY starts N, start ms p50 X p95 Y, no-origin starts P%,
//       played-bytes Q" (what the player read). tools/bench adds the origin's bytes from its access log once
//       the proxy has stopped (requests still running are logged when their connection closes).

import ArgumentParser
import Foundation
import MediaCacheTestSupport
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One item of the feed and what a player reads to play its first seconds.
private struct FeedItem {
  enum Kind: String { case mp4, hls }
  var kind: Kind
  var path: String
  var duration: Double
  /// MP4: the boxes a player reads first (ftyp, moov), the mdat's first payload byte, and each packet's end
  /// offset with its time. HLS: each segment's name, start time and size; the playlist's size.
  var headRanges: [Range<Int64>] = []
  var mdatStart: Int64 = 0
  var packets: [(time: Double, end: Int64)] = []
  var segments: [(name: String, start: Double, size: Int64)] = []
  var playlistSize: Int64 = 0

  /// The requests (file path, byte range or nil for the whole file) that play `seconds`.
  func reads(_ seconds: Double) -> [(path: String, range: Range<Int64>?)] {
    switch kind {
    case .mp4:
      let end = packets.filter { $0.time < seconds }.map(\.end).max() ?? mdatStart
      var ranges = headRanges + [mdatStart..<max(mdatStart + 1, end)]
      ranges.sort { $0.lowerBound < $1.lowerBound }
      var merged: [Range<Int64>] = []
      for range in ranges {
        if let last = merged.last, range.lowerBound <= last.upperBound {
          merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
        } else {
          merged.append(range)
        }
      }
      return merged.map { (path, $0) }
    case .hls:
      let directory = (path as NSString).deletingLastPathComponent
      return [(path, nil)] + segments.filter { $0.start < seconds }.map { ("\(directory)/\($0.name)", nil) }
    }
  }

  /// Bytes of `reads(seconds)`.
  func bytes(_ seconds: Double) -> Int64 {
    switch kind {
    case .mp4: reads(seconds).reduce(0) { $0 + Int64($1.range!.count) }
    case .hls: playlistSize + segments.filter { $0.start < seconds }.reduce(0) { $0 + $1.size }
    }
  }

  static func load(kind: Kind, path: String, media: String) throws -> FeedItem {
    let file = "\(media)/\(path)"
    switch kind {
    case .mp4:
      let data = try Data(contentsOf: URL(fileURLWithPath: file))
      var item = FeedItem(kind: kind, path: path, duration: 0)
      var offset = 0
      while offset + 8 <= data.count {
        var size = Int(data[offset..<offset + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        let type = String(decoding: data[offset + 4..<offset + 8], as: UTF8.self)
        var header = 8
        if size == 1 {
          size = Int(data[offset + 8..<offset + 16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
          header = 16
        } else if size == 0 {
          size = data.count - offset
        }
        guard size >= header else { throw BenchError("\(file): bad box size at \(offset)") }
        if type == "ftyp" || type == "moov" { item.headRanges.append(Int64(offset)..<Int64(offset + size)) }
        if type == "mdat" { item.mdatStart = Int64(offset + header) }
        offset += size
      }
      let probe = try runTool(
        "ffprobe",
        ["-v", "error", "-show_entries", "packet=pts_time,pos,size:format=duration", "-of", "json", file])
      struct Probe: Decodable {
        struct Packet: Decodable { var pts_time: String?; var pos: String?; var size: String }
        struct Format: Decodable { var duration: String }
        var packets: [Packet]
        var format: Format
      }
      let decoded = try JSONDecoder().decode(Probe.self, from: Data(probe.utf8))
      item.duration = Double(decoded.format.duration) ?? 0
      for packet in decoded.packets {
        guard let time = packet.pts_time.flatMap(Double.init), let pos = packet.pos.flatMap(Int64.init),
          let size = Int64(packet.size)
        else { continue }
        item.packets.append((time, pos + size))
      }
      return item
    case .hls:
      let text = try String(contentsOfFile: file, encoding: .utf8)
      var item = FeedItem(kind: kind, path: path, duration: 0)
      item.playlistSize = Int64(text.utf8.count)
      let directory = (file as NSString).deletingLastPathComponent
      var pending: Double?
      for line in text.split(separator: "\n") {
        if line.hasPrefix("#EXTINF:") {
          pending = Double(line.dropFirst(8).split(separator: ",").first ?? "")
        } else if !line.hasPrefix("#"), let length = pending {
          let size =
            try FileManager.default.attributesOfItem(atPath: "\(directory)/\(line)")[.size] as? Int ?? 0
          item.segments.append((String(line), item.duration, Int64(size)))
          item.duration += length
          pending = nil
        }
      }
      return item
    }
  }
}

private func runTool(_ name: String, _ arguments: [String]) throws -> String {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
  process.arguments = [name] + arguments
  let output = Pipe()
  process.standardOutput = output
  process.standardError = FileHandle.nullDevice
  try process.run()
  let data = output.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  guard process.terminationStatus == 0 else {
    throw BenchError("\(name) exited \(process.terminationStatus)")
  }
  return String(decoding: data, as: UTF8.self)
}

/// The client that downloads the whole next item in the background ("whole" strategy), in 256 KiB ranges so
/// that it stops soon after it is told to.
private final class WholeDownloader: @unchecked Sendable {
  private let stopped = Atomic<Bool>(false)
  private let done = DispatchSemaphore(value: 0)

  init(_ files: [(url: String, size: Int64)]) {
    let thread = Thread { [self] in
      defer { done.signal() }
      for file in files {
        guard let target = try? RawTarget(file.url) else { continue }
        var offset: Int64 = 0
        while offset < file.size, !stopped.load(ordering: .relaxed) {
          let end = min(offset + (256 << 10), file.size)
          guard (try? rawGet(target, range: "bytes=\(offset)-\(end - 1)")) != nil else { return }
          offset = end
        }
      }
    }
    thread.start()
  }

  func stop() {
    stopped.store(true, ordering: .relaxed)
    done.wait()
  }
}

struct FeedCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "feed", abstract: "A scripted user scrolling a video feed through the proxy, one strategy.")

  @Option var list: String
  @Option var media: String
  @Option var proxy: String
  @Option var origin: String
  @Option var strategy: String
  @Option var seed: UInt64 = 7
  @Option var speedup: Double = 5

  func run() throws {
    guard ["none", "whole", "preloader"].contains(strategy) else { throw BenchError("unknown --strategy") }
    let items = try String(contentsOfFile: list, encoding: .utf8).split(separator: "\n").map { line in
      let parts = line.split(separator: " ")
      guard parts.count == 2, let kind = FeedItem.Kind(rawValue: String(parts[0])) else {
        throw BenchError("\(list): not 'mp4|hls PATH': '\(line)'")
      }
      return try FeedItem.load(kind: kind, path: String(parts[1]), media: media)
    }
    let proxyTarget = try RawTarget(proxy)
    let originURL = URL(string: origin)!
    let originURLs = items.map { "\(origin)/\($0.path)" }
    // Proxy target of an origin path: /http/HOST:PORT/PATH.
    func proxied(_ path: String) -> String {
      "\(proxy)/http/\(originURL.host!):\(originURL.port!)/\(path)"
    }
    var generator = SeededRandom(seed: seed)
    var starts: [Double] = []
    var originFree = 0
    var played: Int64 = 0
    var downloader: WholeDownloader?
    for (index, item) in items.enumerated() {
      let roll = Double.random(in: 0..<1, using: &generator)
      let watch =
        roll < 0.4 ? 1.0 : roll < 0.8 ? Double.random(in: 5...10, using: &generator) : item.duration
      if strategy == "preloader" {
        let body =
          "{\"items\":[\(originURLs.map { "\"\($0)\"" }.joined(separator: ","))],\"current\":\(index)}"
        try put(proxyTarget, "/preload", body)
      }
      downloader?.stop()
      downloader = nil
      let missesBefore = try metric(proxyTarget, "mediacache_proxy_cache_misses_total")
      let clock = ContinuousClock()
      let began = clock.now
      let first = item.reads(0.1)
      for read in first { try fetch(proxied(read.path), read.range) }
      let start = seconds(clock.now - began)
      let missesAfter = try metric(proxyTarget, "mediacache_proxy_cache_misses_total")
      // The first item's start cannot be preloaded by any strategy: the figures count the others.
      if index > 0 {
        starts.append(start * 1000)
        if missesAfter == missesBefore { originFree += 1 }
      }
      if strategy == "whole", index + 1 < items.count {
        let next = items[index + 1]
        let files = next.reads(next.duration + 1).map { read in
          (proxied(read.path), read.range.map { Int64($0.upperBound) } ?? fileSize("\(media)/\(read.path)"))
        }
        downloader = WholeDownloader(files)
      }
      // The rest of what the watched seconds need, then the user stays.
      let rest = item.reads(watch)
      for read in rest where !first.contains(where: { $0.path == read.path && $0.range == read.range }) {
        try fetch(proxied(read.path), read.range)
      }
      played += item.bytes(watch)
      // Time is compressed for long watches, never below the 1 s a skipping user stays.
      let stay = max(watch / speedup, min(watch, 1)) - seconds(clock.now - began)
      if stay > 0 { usleep(useconds_t(stay * 1e6)) }
      print(
        "item \(index) \(item.kind.rawValue) \(fixed(item.duration, 1)) s: start \(fixed(start * 1000, 1)) ms"
          + "\(missesAfter == missesBefore ? "" : " (origin)"), watched \(fixed(watch, 1)) s")
    }
    downloader?.stop()
    if strategy == "preloader" { try put(proxyTarget, "/preload", "{\"items\":[],\"current\":-1}") }
    print(
      "feed: \(strategy) starts \(starts.count), start ms p50 \(fixed(percentile(starts, 50), 2)) p95"
        + " \(fixed(percentile(starts, 95), 2)), no-origin starts"
        + " \(fixed(100 * Double(originFree) / Double(max(1, starts.count)), 1))%, played-bytes \(played)")
  }

  /// GETs `url` (the range, or all of it) to the end of its body.
  private func fetch(_ url: String, _ range: Range<Int64>?) throws {
    let response = try rawGet(
      try RawTarget(url), range: range.map { "bytes=\($0.lowerBound)-\($0.upperBound - 1)" })
    guard response.status == (range == nil ? 200 : 206) else {
      throw BenchError("GET \(url) \(range.map { "\($0)" } ?? ""): status \(response.status)")
    }
  }

  private func put(_ target: RawTarget, _ path: String, _ body: String) throws {
    let connection = try RawHTTPConnection(port: Int(target.port))
    defer { connection.close() }
    try connection.sendRequest(
      "PUT", path, headers: [("Content-Type", "application/json"), ("Content-Length", "\(body.utf8.count)")])
    try connection.send(body)
    let response = try connection.readResponse()
    guard response.status == 204 else {
      throw BenchError("PUT \(path): \(response.status) \(String(decoding: response.body, as: UTF8.self))")
    }
  }

  private func metric(_ target: RawTarget, _ name: String) throws -> Int64 {
    let body = String(decoding: try rawRequest(port: Int(target.port), "/metrics").body, as: UTF8.self)
    guard let line = body.split(separator: "\n").first(where: { $0.hasPrefix("\(name) ") }),
      let value = Int64(line.split(separator: " ")[1])
    else { throw BenchError("/metrics has no \(name)") }
    return value
  }

  private func fileSize(_ path: String) -> Int64 {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int).map(Int64.init) ?? 0
  }
}
