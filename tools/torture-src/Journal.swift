import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One finished trial as the journal keeps it: enough to add it to its class's figures without running it again.
struct TrialRecord: Codable, Sendable {
  var `class`: String
  var trial: Int
  var faults: Int
  var bytesVerified: Int64
  var failures: [String]
  var seconds: Double
  var counters: [String: Int64]
}

/// The first line of a journal: the run it belongs to.
struct JournalHeader: Codable {
  var journal: Int
  var seed: UInt64
}

/// Why a journal cannot be resumed.
struct JournalError: Error, CustomStringConvertible {
  let path: String
  let line: Int
  let reason: String
  var description: String { "journal \(path), line \(line): \(reason)" }
}

/// An append-only file of finished trials (JSON Lines: a header with the run seed, then one `TrialRecord` per
/// trial, appended and flushed when the trial ends), so that a run of thousands of trials stopped for any reason
/// continues where it stopped when started again with the same journal. A trial that was running when the run
/// stopped has no line and runs again. A last line cut short by a crash is ignored.
final class Journal: Sendable {
  let path: String
  let seed: UInt64
  /// The trials finished by earlier runs, by class and trial number.
  let finished: [String: [Int: TrialRecord]]
  private let handle: Mutex<FileHandle>

  /// Opens the journal at `path`, creating it for `seed` if it does not exist. An existing journal names its
  /// seed; `seed`, when given, must be the same.
  init(path: String, seed: UInt64?) throws {
    self.path = path
    let manager = FileManager.default
    var finished: [String: [Int: TrialRecord]] = [:]
    if let data = manager.contents(atPath: path), !data.isEmpty {
      let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
      let decoder = JSONDecoder()
      guard let header = try? decoder.decode(JournalHeader.self, from: Data(lines[0])), header.journal == 1
      else {
        throw JournalError(path: path, line: 1, reason: "not a mediacache-torture journal (version 1 header)")
      }
      if let seed, seed != header.seed {
        throw JournalError(
          path: path, line: 1,
          reason: "written by the run with seed \(header.seed), not \(seed) (omit --seed to resume it)")
      }
      self.seed = header.seed
      for (index, line) in lines.enumerated().dropFirst() where !line.isEmpty {
        guard let record = try? decoder.decode(TrialRecord.self, from: Data(line)) else {
          // Only the last line may be cut short (the run died while writing it); it is cut off below.
          if index == lines.count - 1 { continue }
          throw JournalError(path: path, line: index + 1, reason: "not a trial record")
        }
        finished[record.class, default: [:]][record.trial] = record
      }
      // Drop a last line cut short, so that the next record starts a line of its own.
      if data.last != UInt8(ascii: "\n"), let end = data.lastIndex(of: UInt8(ascii: "\n")) {
        guard truncate(path, off_t(end + 1)) == 0 else {
          throw JournalError(path: path, line: lines.count, reason: "cannot cut off the unfinished last line")
        }
      }
    } else {
      self.seed = seed ?? UInt64(UInt32.random(in: 1...UInt32.max))
      let header = try JSONEncoder().encode(JournalHeader(journal: 1, seed: self.seed))
      guard manager.createFile(atPath: path, contents: header + Data("\n".utf8)) else {
        throw JournalError(path: path, line: 1, reason: "cannot create it")
      }
    }
    self.finished = finished
    guard let handle = FileHandle(forWritingAtPath: path) else {
      throw JournalError(path: path, line: 1, reason: "cannot open it for appending")
    }
    handle.seekToEndOfFile()
    self.handle = Mutex(handle)
  }

  /// Appends `record` and flushes it to disk.
  func append(_ record: TrialRecord) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    guard let line = try? encoder.encode(record) else { return }
    handle.withLock {
      $0.write(line + Data("\n".utf8))
      try? $0.synchronize()
    }
  }
}
