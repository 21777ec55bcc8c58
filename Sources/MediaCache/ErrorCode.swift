/// The code of an error of MediaCache's libraries (`StoreError.Code`, `OriginError.Code`, `HLSError.Code`, …):
/// a name, compared by value. Each error type declares its codes as static members of
/// `ErrorCode<ThatError>`, so a new code does not break a caller's `switch` over them (which needs a
/// `default`), as NIOFileSystem's `FileSystemError.Code` does.
public struct ErrorCode<Domain>: Hashable, Sendable, CustomStringConvertible {
  private let name: String
  /// A code named `name` (the error types declare theirs).
  package init(_ name: String) { self.name = name }
  /// The code's name, as declared (`notCached`).
  public var description: String { name }
}

extension ErrorCode {
  /// The code named after the case of `kind`, an error's enum of details whose cases are named as the codes
  /// (`.httpStatus(url:…)` → `httpStatus`).
  package init(caseOf kind: some Sendable) {
    let text = String(describing: kind)
    self.init(String(text.prefix { $0 != "(" }))
  }
}
