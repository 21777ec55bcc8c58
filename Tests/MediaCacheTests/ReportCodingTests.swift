import Foundation
import Testing

@testable import MediaCache

/// The reports' Codable conformances and `ReportJSON`: exact keys, nulls written out, lossless round trips.
@Suite struct ReportCodingTests {
  func json(_ value: some Encodable) throws -> String { try ReportJSON.encode(value) }

  let one = ObjectID(CacheKey("one"))
  let two = ObjectID(CacheKey("two"))

  @Test func compactionReportRoundTripsWithEveryReasonListed() throws {
    var report = CompactionReport()
    report.objectsScanned = 7
    report.bytesBefore = 9000
    report.bytesAfter = 4000
    report.evicted = [.size: 1, .age: 1]
    report.bytesFreed = 5000
    report.removed = [
      RemovedObject(id: one, userMetadata: Data("app".utf8), bytes: 3000, reason: .age),
      RemovedObject(id: two, userMetadata: Data(), bytes: 2000, reason: .size),
    ]
    report.trimmed = [TrimmedObject(id: two, keptHead: 8192, bytes: 1000)]
    report.skippedBusy = 1
    report.pinnedKept = 2
    report.vetoed = 3
    report.tmpReaped = 4
    report.orphansRemoved = 5
    report.chunksScrubbed = 6
    report.bytesScrubbed = 24576
    report.chunksDropped = 2
    report.droppedChunks = [one: [0, 3]]
    report.incomplete = true
    report.duration = .milliseconds(250)
    report.dryRun = true
    report.errors = ["x: gone"]

    let text = try json(report)
    #expect(
      text == """
        {"bytesAfter":4000,"bytesBefore":9000,"bytesFreed":5000,"bytesScrubbed":24576,"chunksDropped":2,\
        "chunksScrubbed":6,"droppedChunks":{"\(one.hex)":[0,3]},"dryRun":true,"duration":0.25,\
        "errors":["x: gone"],"evicted":{"age":1,"corrupt":0,"manual":0,"size":1},"evictedCount":2,\
        "incomplete":true,"objectsScanned":7,"orphansRemoved":5,"pinnedKept":2,"removed":[{"bytes":3000,\
        "objectID":"\(one.hex)","reason":"age"},{"bytes":2000,"objectID":"\(two.hex)","reason":"size"}],\
        "skippedBusy":1,"tmpReaped":4,"trimmed":[{"bytes":1000,"keptHead":8192,"keptRanges":[[0,8192]],\
        "objectID":"\(two.hex)"}],"vetoed":3}
        """)
    // A report from before tail cuts (no `trimmed`) still decodes.
    let older = text.replacingOccurrences(
      of: #","trimmed":[{"bytes":1000,"keptHead":8192,"keptRanges":[[0,8192]],"objectID":"\#(two.hex)"}]"#,
      with: "")
    #expect(older != text)
    #expect(try ReportJSON.decode(CompactionReport.self, from: Data(older.utf8)).trimmed.isEmpty)
    // The app's metadata is not printed, so it does not come back; everything else does.
    var expected = report
    expected.removed[0].userMetadata = Data()
    #expect(try ReportJSON.decode(CompactionReport.self, from: Data(text.utf8)) == expected)
    #expect(
      try ReportJSON.decode(CompactionReport.self, from: Data(json(CompactionReport()).utf8))
        == CompactionReport())
  }

  @Test func checkReportWritesNullsAndDerivedCounts() throws {
    var report = CheckReport()
    report.findings = [
      CheckFinding(
        path: "objects/ab/cd/x.data", kind: .chunkChecksum, severity: .error,
        message: "chunk 2 fails its CRC",
        expected: "1a2b3c4d", found: "00000000", chunk: 2, action: .repaired),
      CheckFinding(path: "notes.txt", kind: .unknownEntry, severity: .warning, message: "unknown file"),
      CheckFinding(
        path: "tmp/t", kind: .staleTemporaryFile, severity: .error, message: "stale", action: .failed),
    ]
    report.totals = CheckTotals(
      objects: 3, complete: 2, partial: 1, pinned: 1, busy: 0, bytes: 12288, chunksVerified: 3,
      bytesVerified: 12000)
    report.cancelled = true
    let text = try json(report)
    #expect(text.hasPrefix(#"{"cancelled":true,"corrected":1,"findings":[{"action":"repaired","chunk":2,"#))
    #expect(
      text.contains(
        #"{"action":"none","chunk":null,"expected":null,"found":null,"kind":"unknown-entry","message":"unknown file","path":"notes.txt","severity":"warning"}"#
      ))
    #expect(text.contains(#""uncorrected":1"#))
    #expect(
      text.hasSuffix(
        #""totals":{"busy":0,"bytes":12288,"bytesVerified":12000,"chunksVerified":3,"complete":2,"objects":3,"partial":1,"pinned":1},"uncorrected":1}"#
      ))
    let decoded = try ReportJSON.decode(CheckReport.self, from: Data(text.utf8))
    #expect(decoded == report)
    #expect(decoded.exitStatus == 1 | 4 | 32)
    #expect(report.findings.map(\.identity) == decoded.findings.map(\.identity))
    #expect(
      try json(report.findings[1].identity)
        == #"{"action":"none","chunk":null,"kind":"unknown-entry","path":"notes.txt","severity":"warning"}"#)
  }

  @Test func unknownKindsAndBadIdsAreRefused() throws {
    let finding = #"{"path":"p","kind":"no-such-kind","severity":"error","message":"m","action":"none"}"#
    #expect(throws: DecodingError.self) { try ReportJSON.decode(CheckFinding.self, from: Data(finding.utf8)) }
    #expect(throws: DecodingError.self) { try ReportJSON.decode(ObjectID.self, from: Data(#""ABCD""#.utf8)) }
    #expect(try ReportJSON.decode(ObjectID.self, from: Data(json(one).utf8)) == one)
    #expect(try json(one) == "\"\(one.hex)\"")
    let status = #"{"state":"complete","cachedBytes":5,"length":null,"ranges":[[0,5]]}"#
    #expect(throws: DecodingError.self) {
      try ReportJSON.decode(MediaCache.Status.self, from: Data(status.utf8))
    }
  }

  @Test func statusStatisticsAndRemovalRoundTrip() throws {
    let statuses: [MediaCache.Status] = [
      .none, .complete(length: 0), .complete(length: 10),
      .partial(cachedBytes: 6, length: nil, ranges: [0..<2, 6..<10]),
      .partial(cachedBytes: 4, length: 100, ranges: [96..<100]),
    ]
    for status in statuses {
      #expect(try ReportJSON.decode(MediaCache.Status.self, from: Data(json(status).utf8)) == status)
    }
    #expect(
      try json(statuses[3]) == #"{"cachedBytes":6,"length":null,"ranges":[[0,2],[6,10]],"state":"partial"}"#)

    var statistics = CacheStatistics()
    statistics.objects = 3
    statistics.complete = 1
    statistics.partial = 1
    statistics.unreadable = 1
    statistics.pinned = 1
    statistics.diskBytes = 8192
    statistics.cachedBytes = 5000
    #expect(
      try json(statistics)
        == #"{"cachedBytes":5000,"complete":1,"diskBytes":8192,"empty":0,"objects":3,"partial":1,"pinned":1,"unreadable":1}"#
    )
    #expect(try ReportJSON.decode(CacheStatistics.self, from: Data(json(statistics).utf8)) == statistics)

    let removal = MediaCache.RemovalReport(
      objectsRemoved: 2, bytesFreed: 100, memoryBytesFreed: 50, busy: [two])
    #expect(
      try json(removal)
        == #"{"busy":["\#(two.hex)"],"bytesFreed":100,"memoryBytesFreed":50,"objectsRemoved":2}"#)
    #expect(try ReportJSON.decode(MediaCache.RemovalReport.self, from: Data(json(removal).utf8)) == removal)
  }
}
