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

import ArgumentParser
import Dispatch
import Foundation
import MediaCacheTestOrigin
import MediaCacheTestSupport

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@main
struct TestOriginCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "mediacache-test-origin",
    abstract: "Runs a TestOrigin as its own process until SIGTERM, SIGINT or end of standard input.")

  @Option var host = "127.0.0.1"
  @Option(help: "Port to listen on (0: any free port).") var port: Int?
  @Argument(help: "The port, as --port.") var portArgument: Int?
  @Option(help: "Serve the files under DIR at /files/<relative path>.") var fileRoot: String?
  @Flag(help: "Do not read commands from standard input (and do not stop at its end).") var noStdin = false

  static func main() async { await main(usageStatus: 2) }

  func validate() throws {
    for number in [port, portArgument].compactMap(\.self) where !(0...65535).contains(number) {
      throw ValidationError("--port needs a number 0...65535")
    }
  }

  func run() async throws {
    do {
      try await serve()
      Foundation.exit(0)
    } catch {
      fail("\(error)")
    }
  }

  private func serve() async throws {
    let (host, port, fileRoot, readsStdin) = (host, port ?? portArgument ?? 0, fileRoot, !noStdin)
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
}
