extension CacheChecker {
  /// Two files of one kind for one object (one under a wrong shard: a copy, or a move cut short): the object
  /// goes by the one where its id puts it, whichever the walk found first; the other is reported, and left
  /// alone by a repair (either may be the good one). Returns whether `second` is the one kept.
  func keepsSecond(_ first: String, _ second: ObjectTreeFile, _ report: inout CheckReport) -> Bool {
    let paths = store.paths(for: second.id)
    let right = String((second.isData ? paths.data : paths.manifest).dropFirst(rootPath.count + 1))
    let stray = second.relative == right ? first : second.relative
    var finding = CheckFinding(
      path: stray, kind: .misplacedFile, severity: .error,
      message: "a second copy of an object file, under the wrong shard; the object's own is at \(right)",
      expected: right, found: stray)
    if options.repair {
      finding.action = .failed
      finding.message += "; left both"
    }
    report.findings.append(finding)
    return second.relative == right
  }
}
