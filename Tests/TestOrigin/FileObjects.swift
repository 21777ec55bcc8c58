// The `files` mode: real files under a directory, served with the `normal` mode's semantics.
//
// A request path is percent-decoded once, then refused (404) when it is empty, absolute, has a `..`
// segment or a NUL byte, or when the canonical path (symlinks resolved by `realpath`) is not inside the
// canonical root. Files are read piece by piece with `pread`, never whole.

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension TestOrigin {
  /// The path of file `relativePath` (relative to the origin's file root, `/`-separated) in the `files`
  /// mode: `/files/<relativePath>`, every byte other than `A-Z a-z 0-9 - . _ ~ /` percent-encoded.
  public static func path(file relativePath: String) -> String {
    "/\(Mode.files.rawValue)/\(percentEncodedPath(relativePath))"
  }

  /// The absolute URL of file `relativePath` under the origin's file root:
  /// `http://127.0.0.1:PORT/files/<relativePath>` (see `path(file:)`). Its requests are recorded under
  /// the name `relativePath`: `requests(for: relativePath)`.
  public func url(file relativePath: String) -> String {
    baseURL + Self.path(file: relativePath)
  }

  static func percentEncodedPath(_ text: String) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var bytes: [UInt8] = []
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
        UInt8(ascii: "~"), UInt8(ascii: "/"):
        bytes.append(byte)
      default:
        bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}

/// An open, regular file of the file root, closed when the last reference goes away.
final class OpenFile {
  let descriptor: Int32
  let size: Int
  /// `"<size hex>-<mtime seconds hex>-<mtime nanoseconds hex>"`, quoted: changes when the file is rewritten.
  let etag: String
  /// The modification time (whole seconds) in RFC 1123 form.
  let lastModified: String
  let contentType: String

  private init(descriptor: Int32, size: Int, seconds: Int, nanoseconds: Int, contentType: String) {
    self.descriptor = descriptor
    self.size = size
    self.etag =
      "\"\(String(size, radix: 16))-\(String(seconds, radix: 16))-\(String(nanoseconds, radix: 16))\""
    self.lastModified = HTTPDate.rfc1123(secondsSinceEpoch: seconds)
    self.contentType = contentType
  }

  deinit { _ = close(descriptor) }

  /// Opens `requestPath` (the percent-encoded path after `/files/`) under `root` (a canonical directory
  /// path), or nil when it is not a regular file inside `root`.
  static func open(requestPath: Substring, root: String) -> OpenFile? {
    guard let relative = FilePaths.decodedRelativePath(requestPath),
      let resolved = FilePaths.canonicalPath(root + "/" + relative),
      resolved.hasPrefix(root.hasSuffix("/") ? root : root + "/")
    else { return nil }
    #if canImport(Glibc)
      let descriptor = Glibc.open(resolved, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    #else
      let descriptor = Darwin.open(resolved, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    #endif
    guard descriptor >= 0 else { return nil }
    var info = stat()
    guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
      _ = close(descriptor)
      return nil
    }
    #if canImport(Glibc)
      let modified = info.st_mtim
    #else
      let modified = info.st_mtimespec
    #endif
    return OpenFile(
      descriptor: descriptor, size: Int(info.st_size), seconds: Int(modified.tv_sec),
      nanoseconds: Int(modified.tv_nsec), contentType: FilePaths.contentType(of: relative))
  }

  /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end of the file or on an error.
  func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
    var done = 0
    while done < buffer.count {
      let count = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
      if count > 0 {
        done += count
      } else if count < 0 && errno == EINTR {
        continue
      } else {
        break
      }
    }
    return done
  }
}

enum FilePaths {
  /// The canonical form of the directory `path` (symlinks resolved, no trailing slash except for `/`).
  static func canonicalDirectory(_ path: String) -> String? {
    guard let resolved = canonicalPath(path) else { return nil }
    var info = stat()
    guard stat(resolved, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return nil }
    return resolved
  }

  static func canonicalPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
  }

  /// `encoded` percent-decoded once, or nil when that fails or the result is not a safe relative path:
  /// empty, absolute, with a `.` or `..` segment, an empty segment, or a NUL byte.
  static func decodedRelativePath(_ encoded: Substring) -> String? {
    var bytes: [UInt8] = []
    var iterator = encoded.utf8.makeIterator()
    while let byte = iterator.next() {
      guard byte == UInt8(ascii: "%") else {
        bytes.append(byte)
        continue
      }
      guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
        return nil
      }
      bytes.append(high << 4 | low)
    }
    guard !bytes.isEmpty, !bytes.contains(0) else { return nil }
    let segments = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
    for segment in segments {
      if segment.isEmpty || segment.elementsEqual([UInt8(ascii: ".")])
        || segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")])
      {
        return nil
      }
    }
    return String(validating: bytes, as: UTF8.self)
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
  }

  /// The Content-Type for a file name, by its extension.
  static func contentType(of path: String) -> String {
    let name = path.split(separator: "/").last ?? ""
    guard let dot = name.lastIndex(of: ".") else { return "application/octet-stream" }
    switch name[name.index(after: dot)...].lowercased() {
    case "mp4": return "video/mp4"
    case "m3u8": return "application/vnd.apple.mpegurl"
    case "m3u": return "audio/x-mpegurl"  // as nginx's mime.types has it
    case "ts": return "video/mp2t"
    case "m4s": return "video/iso.segment"
    default: return "application/octet-stream"
    }
  }
}
