import Foundation
import MediaCache

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

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

/// Removes a tree (no symlink is followed).
func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

/// The paths of object `id` under cache `root`.
func objectPaths(_ root: String, _ id: ObjectID) -> (directory: String, data: String, manifest: String) {
  let hex = id.hex
  let directory = "\(root)/objects/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))"
  return (directory, "\(directory)/\(hex).data", "\(directory)/\(hex).manifest")
}
