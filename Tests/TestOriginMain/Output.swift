#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

func emit(_ line: String) {
  var text = line + "\n"
  text.withUTF8 { bytes in
    var offset = 0
    while offset < bytes.count {
      let written = write(1, bytes.baseAddress! + offset, bytes.count - offset)
      if written <= 0 { return }
      offset += written
    }
  }
}

func fail(_ message: String) -> Never {
  var text = "mediacache-test-origin: \(message)\n"
  text.withUTF8 { _ = write(2, $0.baseAddress!, $0.count) }
  exit(2)
}
