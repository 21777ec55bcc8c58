import MediaCacheTestOrigin

/// The answer to one line of standard input (see TestOriginCommand.swift for the commands).
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

extension String {
  /// The line without leading and trailing white space.
  func trimmingCharacters() -> String {
    var slice = Substring(self)
    while let first = slice.first, first.isWhitespace { slice = slice.dropFirst() }
    while let last = slice.last, last.isWhitespace { slice = slice.dropLast() }
    return String(slice)
  }
}
