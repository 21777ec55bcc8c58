import ArgumentParser
import MediaCache

/// `--group G` of `import`, `fetch`, `rm` and `ls`: checked before the command touches the cache, so a bad name
/// is a usage error (exit 64) that changes nothing.
func validateGroupOption(_ group: String?) throws {
  guard let group else { return }
  do {
    try GroupName.validated(group)
  } catch {
    throw ValidationError("--group: \(error)")
  }
}
