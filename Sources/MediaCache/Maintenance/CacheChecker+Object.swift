import Foundation

extension CacheChecker {
  private func absolute(_ relative: String) -> String { "\(rootPath)/\(relative)" }

  private func relative(_ path: String) -> String { String(path.dropFirst(rootPath.count + 1)) }

  /// What one look at an object found.
  struct Evaluation {
    var findings: [CheckFinding] = []
    var manifest: Manifest?
    /// Chunks to drop: short or failing their CRC, with the CRC the manifest records.
    var bad: [Int: UInt32] = [:]
    /// Spans to drop: short or failing their CRC.
    var badSpans: [Manifest.Span] = []
    var totals = CheckTotals()
  }

  /// Checks (and, with `repair`, fixes) one object: placement, manifest, data file, chunk CRCs.
  ///
  /// `--fast` first looks without any lock and stops there when all is well; anything suspicious, every full
  /// verification and every repair is (re)done while holding the object's in-use lock exclusively, so a writer
  /// cannot be mid-way under it. An object another process has open is skipped, except for manifest decoding
  /// (manifests are replaced atomically, so a bad one is bad whoever is using the object).
  @discardableResult
  func checkObject(_ id: ObjectID, files: inout ObjectFiles, _ report: inout CheckReport) -> String? {
    let paths = store.paths(for: id)
    movePlaced(&files.data, to: paths.data, id: id, &report)
    movePlaced(&files.manifest, to: paths.manifest, id: id, &report)

    if options.fast && !options.repair {
      let quick = evaluate(id, files, dataFile: nil, dataSize: files.dataStatus?.size, busy: false)
      if quick.findings.isEmpty {
        add(quick.totals, to: &report.totals)
        return quick.manifest?.group
      }
    }

    var lock: SystemFile?
    var busy = false
    if let data = files.data {
      // The lock must be on the file the path names now: an evictor that removed the object between our open
      // and our lock (manifest, then data file) leaves us holding an unlinked inode that nobody else holds,
      // whose manifest is gone. That is a completed removal, not an orphan; whatever is at the path now was
      // created since and is left to the next check. So is a data file removed since the walk (an evictor or
      // `rm` unlinks the manifest first, then the data file).
      do {
        switch try ObjectLock.acquire(absolute(data), writable: options.repair, exclusive: true, wait: false)
        {
        case .locked(let file, _): lock = file
        case .held: busy = true
        case .missing, .replaced: return nil
        }
      } catch let error as SystemCallError {
        // Not "busy": nobody holds it, this process may not open it (another owner, no permission).
        report.findings.append(.cannotOpen(data, what: "data file", error))
        return nil
      } catch {
        busy = true
      }
    }
    defer { lock?.close() }
    if busy {
      report.totals.busy += 1
      var outcome = evaluate(id, files, dataFile: nil, dataSize: nil, busy: true)
      if options.repair {
        for index in outcome.findings.indices { outcome.findings[index].action = .skippedBusy }
      }
      add(outcome.totals, to: &report.totals)
      report.findings += outcome.findings
      return outcome.manifest?.group
    }
    let dataStatus = try? lock?.status()
    if let dataStatus { files.dataStatus = dataStatus }
    // The walk may be stale: a writer may have committed a manifest (and closed) since, or a process may have
    // removed a manifest whose data file it could not take. Look again now that nobody can be writing.
    if lock != nil {
      if files.manifest == nil, (try? FileSystemCalls.fileType(paths.manifest)) == .regularFile {
        files.manifest = relative(paths.manifest)
      } else if let manifest = files.manifest, (try? FileSystemCalls.status(absolute(manifest))) ?? nil == nil
      {
        files.manifest = nil
      }
    }
    var outcome = evaluate(id, files, dataFile: lock, dataSize: dataStatus?.size, busy: false)
    add(outcome.totals, to: &report.totals)
    if options.repair { repair(&outcome, files: files, lock: lock) }
    report.findings += outcome.findings
    return outcome.manifest?.group
  }

  func add(_ totals: CheckTotals, to sum: inout CheckTotals) {
    sum.objects += totals.objects
    sum.complete += totals.complete
    sum.partial += totals.partial
    sum.pinned += totals.pinned
    sum.bytes += totals.bytes
    sum.chunksVerified += totals.chunksVerified
    sum.bytesVerified += totals.bytesVerified
  }

  /// Looks at an object. With `busy`, only the manifest's own validity is judged. `manifestBytes` reads the
  /// manifest instead of `readFile` (the walk reads it through its open shard directory).
  func evaluate(
    _ id: ObjectID, _ files: ObjectFiles, dataFile: SystemFile?, dataSize: Int64?, busy: Bool,
    manifestBytes: (() throws -> Data)? = nil
  )
    -> Evaluation
  {
    var outcome = Evaluation()
    outcome.totals.bytes = files.dataStatus?.allocatedBytes ?? 0
    guard let manifestPath = files.manifest else {
      guard let data = files.data, !busy else { return outcome }  // a busy data file is a writer's new object
      outcome.findings.append(
        CheckFinding(
          path: data, kind: .orphanData, severity: .error, message: "data file without a manifest",
          expected: "\(id.hex).manifest", found: "no manifest"))
      return outcome
    }
    let manifest: Manifest
    do {
      let bytes = try manifestBytes?() ?? readFile(manifestPath, sizeHint: nil)
      outcome.totals.bytes += Int64(bytes.count)
      manifest = try ManifestCodec.decode(bytes, expectedID: id)
    } catch let error as ManifestError {
      outcome.findings.append(Self.finding(for: error, path: manifestPath))
      return outcome
    } catch let error as SystemCallError where error.errno == .noSuchFileOrDirectory && dataFile == nil {
      // Removed since the walk by a process that holds (or held) the data file: not damage.
      return Evaluation()
    } catch let error as SystemCallError
      where error.errno == .permissionDenied || error.errno == .notPermitted
    {
      outcome.findings.append(.cannotOpen(manifestPath, what: "manifest", error))
      return outcome
    } catch {
      outcome.findings.append(
        CheckFinding(
          path: manifestPath, kind: .truncatedManifest, severity: .error,
          message: "manifest cannot be read: \(error)"))
      return outcome
    }
    outcome.manifest = manifest
    outcome.totals.objects = 1
    if manifest.isComplete {
      outcome.totals.complete = 1
    } else if !manifest.chunkCRCs.isEmpty || !manifest.spans.isEmpty {
      outcome.totals.partial = 1
    }
    if manifest.isPinned { outcome.totals.pinned = 1 }
    if busy { return outcome }

    guard let data = files.data else {
      outcome.findings.append(
        CheckFinding(
          path: manifestPath, kind: .missingData, severity: .error, message: "manifest without its data file",
          expected: "\(id.hex).data", found: "no data file"))
      return outcome
    }
    // Chunks that reach past the end of the data file.
    let size = dataSize ?? 0
    let listed = manifest.chunkCRCs.keys.sorted()
    let beyond = listed.filter { manifest.byteRange(ofChunk: $0).upperBound > size }
    if let first = beyond.first {
      let needed = manifest.byteRange(ofChunk: listed.last!).upperBound
      outcome.findings.append(
        CheckFinding(
          path: data, kind: .shortData, severity: .error,
          message:
            "data file is shorter than the chunks its manifest lists (\(beyond.count) chunk(s) from \(first))",
          expected: "at least \(needed) bytes", found: "\(size) bytes", chunk: first))
      for index in beyond { outcome.bad[index] = manifest.crc(ofChunk: index) }
    }
    let shortSpans = manifest.allSpans.filter { $0.range.upperBound > size }
    if let first = shortSpans.first {
      outcome.findings.append(
        CheckFinding(
          path: data, kind: .shortData, severity: .error,
          message: "data file is shorter than the spans its manifest lists (\(shortSpans.count) span(s))",
          expected: "at least \(shortSpans.last!.range.upperBound) bytes", found: "\(size) bytes",
          chunk: Int(first.range.lowerBound / Int64(manifest.chunkSize))))
      outcome.badSpans = shortSpans
    }
    if !options.fast, let dataFile {
      verifyChunks(
        manifest, listed.filter { outcome.bad[$0] == nil }, file: dataFile, data: data, into: &outcome)
      verifySpans(
        manifest, manifest.allSpans.filter { !outcome.badSpans.contains($0) }, file: dataFile, data: data,
        into: &outcome)
    }
    return outcome
  }

  /// Applies the repair each finding calls for; the object's in-use lock is held exclusively.
  private func repair(_ outcome: inout Evaluation, files: ObjectFiles, lock: SystemFile?) {
    guard let kind = outcome.findings.first?.kind else { return }
    let action: CheckFinding.Action
    switch kind {
    case .orphanData: action = unlink([files.data].compactMap { $0 })
    case .missingData: action = unlink([files.manifest].compactMap { $0 })
    case .unreadable, .wrongType:
      return  // never deleted or changed: a person decides
    case .shortData, .chunkChecksum:
      guard let manifest = outcome.manifest, let lock else { return }
      var change = ManifestChange()
      change.dropped = outcome.bad
      change.droppedSpans = outcome.badSpans
      action = (try? store.commit(change, base: manifest, dataFile: lock)) != nil ? .repaired : .failed
      if action == .repaired {
        CacheMetrics.noteCRCFailures(outcome.bad.count + outcome.badSpans.count, during: .check)
      }
    default:
      // The manifest cannot be read: the object goes, manifest first.
      action = unlink([files.manifest, files.data].compactMap { $0 })
    }
    for index in outcome.findings.indices { outcome.findings[index].action = action }
  }

  /// The bytes of a small file: one `pread` when the size from the walk is right, else read to the end.
  private func readFile(_ relativePath: String, sizeHint: Int64?) throws -> Data {
    // Only a regular file is opened (the walk saw one; this looks again): a symlink is never followed, and a
    // FIFO would block the open.
    if let type = try FileSystemCalls.fileType(absolute(relativePath)), type != .regularFile {
      throw StoreError.unexpectedFileType(
        path: FilePath(relativePath), expected: "regular file", found: type.rawValue)
    }
    let slash = relativePath.lastIndex(of: "/")!
    let directory = try directories.descriptor(for: absolute(String(relativePath[..<slash])))
    let file = try SystemFile(
      directory: directory, name: String(relativePath[relativePath.index(after: slash)...]),
      displayPath: absolute(relativePath))
    defer { file.close() }
    return try ShardedStore.readAll(file, sizeHint: sizeHint ?? 4096)
  }

  /// The bytes of small file `name` of the open directory `directory` (its descriptor and relative path), for
  /// the walk's look at an object (`WalkEvaluation`), which keeps only a clean result: anything else is looked
  /// at again by `checkObject`. The walk has just listed `name` as a regular file; should it have been
  /// replaced since, a symlink is not followed and a FIFO does not block (`SystemFile` opens with
  /// `O_NOFOLLOW | O_NONBLOCK` and refuses anything but a regular file).
  func readFile(named name: String, in directory: (fd: Int32, relative: String)) throws -> Data {
    let file = try SystemFile(
      directory: directory.fd, name: name, displayPath: absolute("\(directory.relative)/\(name)"))
    defer { file.close() }
    return try ShardedStore.readAll(file, sizeHint: 4096)
  }

  /// Reads every listed chunk whole and compares its CRC; adds a finding and an entry in `bad` per mismatch.
  private func verifyChunks(
    _ manifest: Manifest, _ chunks: [Int], file: SystemFile, data: String, into outcome: inout Evaluation
  ) {
    let verifier = ChunkVerifier(chunkSize: manifest.chunkSize)
    for index in chunks {
      let range = manifest.byteRange(ofChunk: index)
      let expected = manifest.crc(ofChunk: index)!
      // A read that fails counts as no bytes read: the chunk fails.
      let check =
        (try? verifier.check(index, of: manifest, in: file))
        ?? ChunkCheck(range: range, expected: expected, bytesRead: 0, actual: 0)
      outcome.totals.chunksVerified += 1
      outcome.totals.bytesVerified += Int64(check.bytesRead)
      if !check.passed {
        outcome.bad[index] = expected
        outcome.findings.append(
          CheckFinding(
            path: data, kind: .chunkChecksum, severity: .error,
            message: "chunk \(index) (bytes \(range.lowerBound)-\(range.upperBound - 1)) fails its CRC",
            expected: hex32(expected), found: hex32(check.actual), chunk: index))
      }
    }
  }

  /// Reads every listed span whole and compares its CRC; adds a finding and an entry in `badSpans` per mismatch.
  private func verifySpans(
    _ manifest: Manifest, _ spans: [Manifest.Span], file: SystemFile, data: String,
    into outcome: inout Evaluation
  ) {
    let verifier = ChunkVerifier(chunkSize: manifest.chunkSize)
    for span in spans {
      let check =
        (try? verifier.check(span, in: file))
        ?? ChunkCheck(range: span.range, expected: span.crc, bytesRead: 0, actual: 0)
      outcome.totals.bytesVerified += Int64(check.bytesRead)
      if !check.passed {
        let index = Int(span.range.lowerBound / Int64(manifest.chunkSize))
        outcome.badSpans.append(span)
        outcome.findings.append(
          CheckFinding(
            path: data, kind: .chunkChecksum, severity: .error,
            message:
              "span of chunk \(index) (bytes \(span.range.lowerBound)-\(span.range.upperBound - 1)) fails its CRC",
            expected: hex32(span.crc), found: hex32(check.actual), chunk: index))
      }
    }
  }

  /// Moves a file stored under the wrong shard to its right path (repair), reporting it either way.
  private func movePlaced(
    _ current: inout String?, to right: String, id: ObjectID, _ report: inout CheckReport
  ) {
    guard let found = current, absolute(found) != right else { return }
    var finding = CheckFinding(
      path: found, kind: .misplacedFile, severity: .error,
      message: "object file stored under the wrong shard",
      expected: relative(right), found: found)
    if options.repair {
      if (try? FileSystemCalls.status(right)) ?? nil != nil {
        finding.action = .failed
        finding.message += "; a file already exists at the right path, left both"
      } else {
        do {
          try store.ensureShard(for: id)
          try FileSystemCalls.renameFile(absolute(found), to: right)
          finding.action = .repaired
          current = relative(right)
          removeEmptyParents(of: found)
        } catch {
          finding.action = .failed
        }
      }
    }
    report.findings.append(finding)
  }

  /// After moving a file out of a misnamed shard, removes the shard directories it leaves empty.
  private func removeEmptyParents(of relativePath: String) {
    var directory = (relativePath as NSString).deletingLastPathComponent
    while directory.hasPrefix("objects/") {
      guard FileSystemCalls.removeEmptyDirectory(absolute(directory)) else { return }
      directory = (directory as NSString).deletingLastPathComponent
    }
  }

  private func unlink(_ files: [String]) -> CheckFinding.Action {
    do {
      for file in files { try FileSystemCalls.unlinkFile(absolute(file)) }
      return .repaired
    } catch {
      return .failed
    }
  }

  static func finding(for error: ManifestError, path: String) -> CheckFinding {
    var finding = CheckFinding(
      path: path, kind: .invalidManifest, severity: .error, message: "manifest: \(error)")
    switch error.kind {
    case .badMagic(let found):
      finding.kind = .badMagic
      finding.expected = "4d434d46 (MCMF)"
      finding.found = found.map { String(format: "%02x", $0) }.joined()
    case .unsupportedVersion(let major, let minor):
      finding.kind = .unsupportedManifestVersion
      finding.expected = "\(ManifestCodec.majorVersion).x"
      finding.found = "\(major).\(minor)"
    case .checksumMismatch(let stored, let computed):
      finding.kind = .manifestChecksum
      finding.expected = hex32(computed)
      finding.found = hex32(stored)
    case .truncated(let needed, let available, _):
      finding.kind = .truncatedManifest
      finding.expected = "\(needed) more bytes"
      finding.found = "\(available)"
    case .objectIDMismatch(let expected, let found):
      finding.kind = .hashPathMismatch
      finding.message = "manifest names another object than its file name"
      finding.expected = expected.hex
      finding.found = found.hex
    case .invalidField, .trailingBytes:
      break
    }
    return finding
  }
}

extension CheckFinding {
  /// A file this process may not open (another owner, no permission; not "busy": nobody holds it): an
  /// `unreadable` error, and the object is left alone.
  static func cannotOpen(_ path: String, what: String, _ error: SystemCallError) -> CheckFinding {
    CheckFinding(
      path: path, kind: .unreadable, severity: .error,
      message: "\(what) cannot be opened: \(error.errno) (wrong owner or mode?); left alone")
  }
}
