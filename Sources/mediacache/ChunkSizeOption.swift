import ArgumentParser
import MediaCache

/// Checks `--chunk-size` (of `proxy` and `fetch`): a usage error outside what a manifest can hold.
func validateChunkSizeOption(_ chunkSize: Int) throws {
  guard (Manifest.minChunkSize...Manifest.maxChunkSize).contains(chunkSize) else {
    throw ValidationError(
      "--chunk-size must be \(Manifest.minChunkSize)...\(Manifest.maxChunkSize) bytes, not \(chunkSize)")
  }
}
