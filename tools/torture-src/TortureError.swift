/// A failure of the driver itself (not of a trial): bad arguments, a binary that does not start.
struct TortureError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}
