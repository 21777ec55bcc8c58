import ArgumentParser

/// Help of the KEY-OR-URL argument the object commands take.
var keyOrURLHelp: ArgumentHelp {
  ArgumentHelp(
    "The cache key: usually the origin URL, which goes through --ignore-query.", valueName: "KEY-OR-URL")
}
