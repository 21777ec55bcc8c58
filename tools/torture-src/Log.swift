import Foundation

/// A line on standard error (progress and failures; the summary goes to standard output).
func log(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}
