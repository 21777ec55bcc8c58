import Testing

@testable import MediaCache

/// Asserts that `body` throws a `StoreError` for which `matches` holds, and returns it.
@discardableResult
func expectStoreError(
  _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation,
  _ matches: (StoreError) -> Bool
) -> StoreError? {
  do {
    try body()
    Issue.record("expected a StoreError, nothing was thrown", sourceLocation: sourceLocation)
  } catch let error as StoreError {
    #expect(matches(error), "unexpected \(error)", sourceLocation: sourceLocation)
    return error
  } catch {
    Issue.record("expected a StoreError, got \(error)", sourceLocation: sourceLocation)
  }
  return nil
}
