import ArgumentParser
import Foundation
import MediaCache
import MediaCacheHTTP
import MediaCacheProxy
import MediaCacheStreaming

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// MARK: DASH

extension FetchCommand {
  /// `fetch --dash`: the MPD, then for one representation per adaptation set (of every period) its
  /// initialization segment and every media segment, through the reader's background prefetch, with one
  /// progress display (the same as `fetch --hls`).
  func fetchDASH() async throws {
    try await withReader { try await fetchDASH(reader: $0) }
  }

  private func fetchDASH(reader: CachingReader) async throws {
    let (body, base) = try await Self.readMPD(url, reader: reader)
    let presentation = try MPDSegments.parse(body, url: base)
    // Live MPDs change under the fetch and their segments expire; what a timeline lists now is a moving
    // window, so the command refuses rather than cache a window that is stale by the time it is played.
    if presentation.isDynamic { throw MPDError.dynamic(url: url) }
    let chosen = try chooseRepresentations(presentation)
    guard !chosen.isEmpty else { throw fail("\(url): the MPD lists no representations", .failure) }
    for (period, set, representation) in chosen {
      let where_ = presentation.periods.count > 1 ? "period \(period.index) " : ""
      printOut(
        "\(where_)adaptation set \(set.index)\(set.contentType.map { " (\($0))" } ?? ""): representation "
          + "\(Self.describe(representation)) of \(set.representations.count)")
    }

    // Every file once, in playback order per representation; initialization (and index) segments are
    // prerequisites: cached before any file after them is started.
    var files: [String] = []
    var seen: Set<String> = []
    var prerequisites: Set<String> = []
    var mediaSegments = 0
    var initSegments = 0
    var budget = maxSegments
    for (_, _, representation) in chosen {
      let segments = try Self.segments(of: representation, budget: budget, total: maxSegments)
      budget -= segments.count
      for segment in segments {
        let file = segment.url.absoluteString
        switch segment.kind {
        case .media: mediaSegments += 1
        case .initialization:
          initSegments += 1
          prerequisites.insert(file)
        case .index: prerequisites.insert(file)
        }
        // Byte-range segments (SegmentList mediaRange, SegmentBase) are fetched as whole files: a player of
        // the representation reads all of them.
        if seen.insert(file).inserted { files.append(file) }
      }
    }

    let final = try await joiningGroup([url] + files, cache: reader.cache) {
      let final = try await Self.prefetchShowingProgress(files, prerequisites: prerequisites, reader: reader)
      // Everything a player of these representations needs is on disk, or the exit status says what is not.
      try await Self.requireComplete([url] + files, reader: reader)
      return final
    }
    printOut(
      "cached DASH \(url): \(Self.count(chosen.count, "representation")), \(Self.count(files.count, "file")) "
        + "(\(Self.count(mediaSegments, "media segment")), \(Self.count(initSegments, "initialization segment"))), "
        + "\(final.cachedBytes) bytes; fetched \(final.fetchedBytes) bytes from the origin")
  }

  /// The representation's segments, at most `budget` (what `total` leaves after the representations before);
  /// past it, the error names `total`, the limit the user set.
  private static func segments(of representation: MPDSegments.Representation, budget: Int, total: Int) throws
    -> [MPDSegments.Segment]
  {
    do {
      return try representation.segments(limit: budget)
    } catch {
      if case .tooManySegments(let at, _) = error.kind {
        throw MPDError.tooManySegments(url: error.url, at: at, limit: total)
      }
      throw error
    }
  }

  /// One representation per adaptation set of every period: the first `--representation` ID the set has,
  /// else the highest `bandwidth` (the first of equals; none counts as lowest). An ID that no set has is a
  /// usage error listing the representations.
  private func chooseRepresentations(_ presentation: MPDSegments.Presentation) throws -> [(
    period: MPDSegments.Period, set: MPDSegments.AdaptationSet, representation: MPDSegments.Representation
  )] {
    var chosen: [(MPDSegments.Period, MPDSegments.AdaptationSet, MPDSegments.Representation)] = []
    var matched: Set<String> = []
    for period in presentation.periods {
      for set in period.adaptationSets where !set.representations.isEmpty {
        if let id = representations.first(where: { id in set.representations.contains { $0.id == id } }),
          let representation = set.representations.first(where: { $0.id == id })
        {
          matched.insert(id)
          chosen.append((period, set, representation))
          continue
        }
        var best = set.representations[0]
        for candidate in set.representations.dropFirst()
        where (candidate.bandwidth ?? -1) > (best.bandwidth ?? -1) {
          best = candidate
        }
        chosen.append((period, set, best))
      }
    }
    let unmatched = representations.filter { !matched.contains($0) }
    if let missing = unmatched.first {
      var lines: [String] = []
      for period in presentation.periods {
        for set in period.adaptationSets {
          let ids = set.representations.map { Self.describe($0) }.joined(separator: ", ")
          lines.append(
            "  period \(period.index) adaptation set \(set.index)\(set.contentType.map { " (\($0))" } ?? ""): \(ids)"
          )
        }
      }
      throw fail(
        "--representation '\(missing)' matches no representation; \(url) has:\n"
          + lines.joined(separator: "\n"),
        .usage)
    }
    return chosen
  }

  /// `'1' (bandwidth 100000, 192x108, avc1.4d400c)`.
  static func describe(_ representation: MPDSegments.Representation) -> String {
    var fields: [String] = []
    if let bandwidth = representation.bandwidth { fields.append("bandwidth \(bandwidth)") }
    if let width = representation.width, let height = representation.height {
      fields.append("\(width)x\(height)")
    }
    if let codecs = representation.codecs { fields.append(codecs) }
    return "'\(representation.id)'" + (fields.isEmpty ? "" : " (\(fields.joined(separator: ", ")))")
  }

  /// Reads a whole MPD through the cache (so it is cached too), with the URL its references resolve against
  /// (where a redirect led). Refuses more than `MPDSegments.maxManifestBytes` without reading past them.
  static func readMPD(_ url: String, reader: CachingReader) async throws -> (body: Data, base: URL) {
    let limit = MPDSegments.maxManifestBytes
    // Fetched as background work (bounded: one byte past the limit shows an MPD too large), then read from
    // the cache.
    for try await _ in reader.prefetch(url, range: .bounded(0..<(Int64(limit) + 1))) {}
    return try await readWhole(url, limit: limit, reader: reader) {
      MPDError.tooLarge(url: url, bytes: $0, limit: limit)
    }
  }
}

extension FetchCommand {
  /// The `--dash` options' checks (called from `validate`).
  func validateDASH() throws {
    if dash && hls { throw ValidationError("--dash cannot be combined with --hls") }
    if dash && range != nil { throw ValidationError("--range cannot be combined with --dash") }
    if !representations.isEmpty && !dash { throw ValidationError("--representation needs --dash") }
    if maxSegments < 1 { throw ValidationError("--max-segments must be 1 or more, not \(maxSegments)") }
  }
}
