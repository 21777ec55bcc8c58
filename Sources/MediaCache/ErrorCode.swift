/// The code of an error of MediaCache's libraries (`StoreError.Code`, `OriginError.Code`, `HLSError.Code`, …):
/// a `@nonexhaustive` enum named after the error's cases, so a new code does not break a caller's `switch`
/// over them (outside this package it needs an `@unknown default`), as NIOFileSystem's
/// `FileSystemError.Code` does with a struct. Its `description` is the code's name (`notCached`).
public protocol ErrorCode: RawRepresentable<String>, CaseIterable, Hashable, Sendable, CustomStringConvertible
{}

extension ErrorCode {
  /// The code's name, as declared (`notCached`).
  public var description: String { rawValue }

  /// The code named after the case of `kind`, an error's enum of details whose cases are named as the codes
  /// (`.httpStatus(url:…)` → `httpStatus`). A case with no code of that name is a programming error.
  package init(caseOf kind: some Sendable) {
    let text = String(describing: kind)
    let name = String(text.prefix { $0 != "(" })
    guard let code = Self(rawValue: name) else { preconditionFailure("\(Self.self) has no code '\(name)'") }
    self = code
  }
}
