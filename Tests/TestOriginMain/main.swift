// mediacache-test-origin: runs a TestOrigin as its own process, for tests that kill a client process and
// for benchmarks.
//
//   mediacache-test-origin [--host 127.0.0.1] [--port N | N] [--file-root DIR] [--no-stdin]
//
// With --file-root, `/files/<relative path>` serves the files under DIR (the `files` mode).
//
// Prints `listening on http://127.0.0.1:PORT` once it accepts connections, then serves until SIGTERM,
// SIGINT or end of standard input (unless --no-stdin), and exits 0. Lines on standard input are commands,
// each answered with one line:
//   version <name> <n>         set the object's version                      -> ok
//   size <name> <n>|-          override (or stop overriding) the object size -> ok
//   reset-flaky                forget the flaky-mode counters                -> ok
//   reset-records              forget the request records                    -> ok
//   stats <name>               -> stats <name> requests=R complete=C bytes=B disconnected=D statuses=S,...

import Dispatch
import MediaCacheTestOrigin

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

func answer(_ command: String, origin: TestOrigin) -> String {
  let words = command.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
  guard let verb = words.first else { return "error: empty command" }
  switch (verb, words.count) {
  case ("version", 3):
    guard let version = Int(words[2]) else { return "error: bad version '\(words[2])'" }
    origin.setVersion(name: words[1], to: version)
    return "ok"
  case ("size", 3):
    if words[2] == "-" {
      origin.setSize(name: words[1], to: nil)
      return "ok"
    }
    guard let size = Int(words[2]), size >= 0 else { return "error: bad size '\(words[2])'" }
    origin.setSize(name: words[1], to: size)
    return "ok"
  case ("reset-flaky", 1):
    origin.resetFlakyCounters()
    return "ok"
  case ("reset-records", 1):
    origin.resetRecords()
    return "ok"
  case ("stats", 2):
    let records = origin.requests(for: words[1])
    let complete = records.filter(\.isComplete).count
    let bytes = records.reduce(0) { $0 + $1.bodyBytesSent }
    let disconnected = records.filter(\.clientDisconnected).count
    let statuses = records.map { String($0.status) }.joined(separator: ",")
    return
      "stats \(words[1]) requests=\(records.count) complete=\(complete) bytes=\(bytes) "
      + "disconnected=\(disconnected) statuses=\(statuses)"
  default:
    return "error: unknown command '\(command)'"
  }
}

func run() async throws {
  var host = "127.0.0.1"
  var port = 0
  var readsStdin = true
  var fileRoot: String?
  var arguments = CommandLine.arguments.dropFirst()
  while let argument = arguments.popFirst() {
    switch argument {
    case "--host":
      guard let value = arguments.popFirst() else { fail("--host needs a value") }
      host = value
    case "--port":
      guard let value = arguments.popFirst(), let number = Int(value), (0...65535).contains(number) else {
        fail("--port needs a number 0...65535")
      }
      port = number
    case "--file-root":
      guard let value = arguments.popFirst() else { fail("--file-root needs a directory") }
      fileRoot = value
    case "--no-stdin":
      readsStdin = false
    case "-h", "--help":
      emit("usage: mediacache-test-origin [--host 127.0.0.1] [--port N | N] [--file-root DIR] [--no-stdin]")
      return
    default:
      guard let number = Int(argument), (0...65535).contains(number) else {
        fail("unknown argument '\(argument)'")
      }
      port = number
    }
  }

  let origin = try await TestOrigin.start(host: host, port: port, fileRoot: fileRoot)
  let (stops, stop) = AsyncStream.makeStream(of: String.self)

  var sources: [any DispatchSourceSignal] = []
  for signalNumber in [SIGTERM, SIGINT] {
    signal(signalNumber, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
    source.setEventHandler { stop.yield("signal \(signalNumber)") }
    source.resume()
    sources.append(source)
  }
  if readsStdin {
    DispatchQueue.global().async {
      while let line = readLine() {
        let command = line.trimmingCharacters()
        if !command.isEmpty { emit(answer(command, origin: origin)) }
      }
      stop.yield("end of standard input")
    }
  }

  emit("listening on \(origin.baseURL)")
  var iterator = stops.makeAsyncIterator()
  _ = await iterator.next()
  try await origin.shutdown()
  sources.forEach { $0.cancel() }
}

extension String {
  fileprivate func trimmingCharacters() -> String {
    var slice = Substring(self)
    while let first = slice.first, first.isWhitespace { slice = slice.dropFirst() }
    while let last = slice.last, last.isWhitespace { slice = slice.dropLast() }
    return String(slice)
  }
}

do {
  try await run()
  exit(0)
} catch {
  fail("\(error)")
}
