import Foundation

extension CacheChecker {
  private func absolute(_ relative: String) -> String { "\(root)/\(relative)" }

  private func relative(_ path: String) -> String { String(path.dropFirst(root.count + 1)) }

  /// Checks (and, with `repair`, fixes) one object: placement, manifest, data file, chunk CRCs.
  func checkObject(_ id: ObjectID, files: inout ObjectFiles, _ report: inout CheckReport) {
    let paths = store.paths(for: id)
    movePlaced(&files.data, to: paths.data, id: id, &report)
    movePlaced(&files.manifest, to: paths.manifest, id: id, &report)

    // Hold the in-use lock exclusively while looking at the data, so no writer starts under the check. If
    // another process has the object open, only its manifest is checked.
    var lock: SystemFile?
    var busy = false
    if let data = files.data {
      if let file = try? SystemFile(path: absolute(data), writable: options.repair) {
        if (try? file.lock(exclusive: true, wait: false)) == true { lock = file } else { busy = true }
      } else {
        busy = true  // cannot open it: treat like an object we must not touch
      }
    }
    defer { lock?.close() }
    if busy { report.totals.busy += 1 }

    guard let manifestPath = files.manifest else {
      guard let data = files.data, !busy else { return }  // a busy data file is a writer's new object
      report.totals.bytes += (try? FileSystemCalls.status(absolute(data)))??.allocatedBytes ?? 0
      var finding = CheckFinding(
        path: data, kind: .orphanData, severity: .error, message: "data file without a manifest",
        expected: "\(id.hex).manifest", found: "no manifest")
      if options.repair { finding.action = unlink([data]) }
      report.findings.append(finding)
      return
    }

    let manifest: Manifest
    do {
      let bytes = try Data(contentsOf: URL(fileURLWithPath: absolute(manifestPath)))
      manifest = try ManifestCodec.decode(bytes, expectedID: id)
    } catch let error as ManifestError {
      var finding = Self.finding(for: error, path: manifestPath)
      if options.repair {
        finding.action = busy ? .skippedBusy : unlink([manifestPath] + (files.data.map { [$0] } ?? []))
      }
      report.findings.append(finding)
      return
    } catch {
      report.findings.append(
        CheckFinding(
          path: manifestPath, kind: .truncatedManifest, severity: .error,
          message: "manifest cannot be read: \(error)"))
      return
    }

    report.totals.objects += 1
    if manifest.isComplete {
      report.totals.complete += 1
    } else if !manifest.chunkCRCs.isEmpty {
      report.totals.partial += 1
    }
    if manifest.isPinned { report.totals.pinned += 1 }
    let manifestBytes = (try? FileSystemCalls.status(absolute(manifestPath)))??.size ?? 0
    report.totals.bytes += manifestBytes

    guard let data = files.data else {
      var finding = CheckFinding(
        path: manifestPath, kind: .missingData, severity: .error, message: "manifest without its data file",
        expected: "\(id.hex).data", found: "no data file")
      if options.repair { finding.action = unlink([manifestPath]) }
      report.findings.append(finding)
      return
    }
    guard !busy, let lock else { return }
    let dataStatus = try? lock.status()
    report.totals.bytes += dataStatus?.allocatedBytes ?? 0
    var bad: [Int: UInt32] = [:]

    // Chunks that reach past the end of the data file.
    let size = dataStatus?.size ?? 0
    let listed = manifest.chunkCRCs.keys.sorted()
    let beyond = listed.filter { manifest.byteRange(ofChunk: $0).upperBound > size }
    if let first = beyond.first {
      let needed = manifest.byteRange(ofChunk: listed.last!).upperBound
      report.findings.append(
        CheckFinding(
          path: data, kind: .shortData, severity: .error,
          message:
            "data file is shorter than the chunks its manifest lists (\(beyond.count) chunk(s) from \(first))",
          expected: "at least \(needed) bytes", found: "\(size) bytes", chunk: first))
      for index in beyond { bad[index] = manifest.crc(ofChunk: index) }
    }

    if !options.fast {
      verifyChunks(manifest, listed.filter { bad[$0] == nil }, file: lock, data: data, into: &bad, &report)
    }

    if options.repair && !bad.isEmpty {
      var change = ManifestChange()
      change.dropped = bad
      let action: CheckFinding.Action
      do {
        _ = try store.commit(change, base: manifest, dataFile: lock)
        action = .repaired
      } catch {
        action = .failed
      }
      for index in report.findings.indices.reversed() where report.findings[index].path == data {
        guard report.findings[index].kind == .shortData || report.findings[index].kind == .chunkChecksum
        else { break }
        report.findings[index].action = action
      }
    }
  }

  /// Reads every listed chunk whole and compares its CRC; adds a finding and an entry in `bad` per mismatch.
  private func verifyChunks(
    _ manifest: Manifest, _ chunks: [Int], file: SystemFile, data: String, into bad: inout [Int: UInt32],
    _ report: inout CheckReport
  ) {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: manifest.chunkSize, alignment: 64)
    defer { buffer.deallocate() }
    for index in chunks {
      let range = manifest.byteRange(ofChunk: index)
      let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(range.count)])
      let count = (try? file.read(into: target, at: range.lowerBound)) ?? 0
      let crc = CRC32.checksum(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
      let expected = manifest.crc(ofChunk: index)!
      report.totals.chunksVerified += 1
      report.totals.bytesVerified += Int64(count)
      if crc != expected || count != target.count {
        bad[index] = expected
        report.findings.append(
          CheckFinding(
            path: data, kind: .chunkChecksum, severity: .error,
            message: "chunk \(index) (bytes \(range.lowerBound)-\(range.upperBound - 1)) fails its CRC",
            expected: hex32(expected), found: hex32(crc), chunk: index))
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
    switch error {
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
