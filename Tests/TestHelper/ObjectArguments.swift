import ArgumentParser

/// `CACHE KEY SOURCE`: the object `write` writes and `read` checks, and the file of its bytes.
struct ObjectArguments: ParsableArguments {
  @Argument(help: "The cache directory.") var cache: String
  @Argument(help: "The object's key.") var key: String
  @Argument(help: "The file holding the object's bytes.") var source: String
}
