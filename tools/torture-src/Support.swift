import Foundation
import MediaCache
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A failure of the driver itself (not of a trial): bad arguments, a binary that does not start.
struct TortureError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// SplitMix64: every random choice of a trial comes from one of these, seeded from `--seed`, the class and the
/// trial number, so a trial makes the same choices (sizes, kill delays, damage) when run again.
struct SeededRandom: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// The seed of trial `trial` of class `name` under run seed `seed`.
  static func trialSeed(_ seed: UInt64, _ name: String, _ trial: Int) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in name.utf8 {
      hash ^= UInt64(byte)
      hash &*= 0x0000_0100_0000_01B3
    }
    var mixer = SeededRandom(seed: seed ^ hash ^ (UInt64(trial) &* 0xD6E8_FEB8_6659_FD93))
    return mixer.next()
  }

  /// A lowercase hex token of `count` characters (object names that no byte of the origin will contain).
  mutating func token(_ count: Int = 12) -> String {
    let digits = Array("0123456789abcdef")
    return String((0..<count).map { _ in digits[Int(next() & 15)] })
  }

  /// Seconds, uniform in `range`.
  mutating func seconds(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &self) }
}

/// Seconds since an arbitrary start, monotonic.
func monotonicSeconds() -> Double {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

func sleepSeconds(_ seconds: Double) {
  guard seconds > 0 else { return }
  usleep(useconds_t(min(seconds, 3600) * 1_000_000))
}

func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

/// A line on standard error (progress and failures; the summary goes to standard output).
func log(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Thread-safe counters and failures of one fault class.
final class ClassTally: Sendable {
  let name: String
  private struct State {
    var trials = 0
    var faults = 0
    var bytesVerified: Int64 = 0
    var failures: [String] = []
    var counters: [String: Int64] = [:]
  }
  private let state = Mutex(State())

  init(name: String) { self.name = name }

  func trialDone() { state.withLock { $0.trials += 1 } }
  func fault(_ count: Int = 1) { state.withLock { $0.faults += count } }
  func verified(_ bytes: Int64) { state.withLock { $0.bytesVerified += bytes } }
  func count(_ key: String, _ amount: Int64 = 1) { state.withLock { $0.counters[key, default: 0] += amount } }
  func fail(_ message: String) {
    state.withLock { $0.failures.append(message) }
    log("FAIL [\(name)] \(message)")
  }

  var trials: Int { state.withLock { $0.trials } }
  var faults: Int { state.withLock { $0.faults } }
  var bytesVerified: Int64 { state.withLock { $0.bytesVerified } }
  var failures: [String] { state.withLock { $0.failures } }
  var counters: [String: Int64] { state.withLock { $0.counters } }
}

/// Where one trial runs and how to report its failures.
struct TrialContext: Sendable {
  let tally: ClassTally
  let trial: Int
  let seed: UInt64
  let directory: String
  let runSeed: UInt64

  func fail(_ message: String) {
    tally.fail(
      "trial \(trial) (trial seed \(String(seed, radix: 16))): \(message) "
        + "[reproduce: tools/torture --classes \(tally.name) --seed \(runSeed) --trials \(trial + 1) "
        + "--only-trial \(trial); files in \(directory)]")
  }
}

// MARK: Files

/// The whole content of a file, or nil if it cannot be read.
func readWholeFile(_ path: String) -> [UInt8]? {
  guard let data = FileManager.default.contents(atPath: path) else { return nil }
  return [UInt8](data)
}

/// Writes `bytes` to a new file (mode 0600), replacing any.
func writeWholeFile(_ path: String, _ bytes: [UInt8]) throws {
  let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
  guard descriptor >= 0 else { throw TortureError("cannot create \(path): \(errnoText())") }
  defer { close(descriptor) }
  var done = 0
  while done < bytes.count {
    let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + done, $0.count - done) }
    if count < 0 && errno == EINTR { continue }
    guard count > 0 else { throw TortureError("cannot write \(path): \(errnoText())") }
    done += count
  }
}

/// Reads `count` bytes at `offset` of the file at `path` without following a symlink; nil if it cannot.
func readBytes(_ path: String, at offset: Int64, count: Int) -> [UInt8]? {
  let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
  guard descriptor >= 0 else { return nil }
  defer { close(descriptor) }
  var buffer = [UInt8](repeating: 0, count: count)
  var done = 0
  while done < count {
    let got = buffer.withUnsafeMutableBytes {
      pread(descriptor, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done))
    }
    if got < 0 && errno == EINTR { continue }
    if got <= 0 { break }
    done += got
  }
  return done == count ? buffer : Array(buffer[..<done])
}

/// Sets a file's access and modification times to `seconds` since the epoch (not following a symlink).
func setModificationTime(_ path: String, _ seconds: Double) {
  let whole = Int(seconds.rounded(.down))
  let spec = timespec(tv_sec: whole, tv_nsec: Int((seconds - Double(whole)) * 1e9))
  var times = [spec, spec]
  _ = utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
}

func now() -> Double { Date().timeIntervalSince1970 }

/// Removes a tree (no symlink is followed).
func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

/// The paths of object `id` under cache `root`.
func objectPaths(_ root: String, _ id: ObjectID) -> (directory: String, data: String, manifest: String) {
  let hex = id.hex
  let directory = "\(root)/objects/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))"
  return (directory, "\(directory)/\(hex).data", "\(directory)/\(hex).manifest")
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
func percentEncode(_ text: String) -> String {
  var out = ""
  for byte in text.utf8 {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
      UInt8(ascii: "~"):
      out.unicodeScalars.append(Unicode.Scalar(byte))
    default:
      out += String(format: "%%%02X", byte)
    }
  }
  return out
}

/// A flag threads share (an `Atomic` cannot be captured by an escaping closure).
final class StopFlag: Sendable {
  private let value = Atomic<Bool>(false)
  var isSet: Bool { value.load(ordering: .relaxed) }
  func set() { value.store(true, ordering: .relaxed) }
}
