/// A report printed as one JSON object together with a few facts about the run that made it: the report's keys
/// and the context's side by side, not nested (`cache-fsck --json` adds the directory, mode and exit status to the
/// check report's keys; `cache-compactor --json` adds the pass number and namespace to the compaction report's).
///
/// Both types keep their own `Codable` conformance; this one writes both into the same keyed container and
/// reads both from it, so a tool's output type needs no hand-written coding. The two key sets must not overlap.
/// The context's properties read through the value (`line.pass`), the report's through `report`.
@dynamicMemberLookup
package struct ReportWithContext<Context: Codable & Equatable, Report: Codable & Equatable>: Codable,
  Equatable
{
  /// The facts about the run.
  package var context: Context
  /// The report.
  package var report: Report

  /// `report`, printed with the keys of `context` beside its own.
  package init(_ context: Context, report: Report) {
    self.context = context
    self.report = report
  }

  /// Decodes the context and the report from the same object.
  package init(from decoder: any Decoder) throws {
    context = try Context(from: decoder)
    report = try Report(from: decoder)
  }

  /// Encodes the report's keys, then the context's, into one object.
  package func encode(to encoder: any Encoder) throws {
    try report.encode(to: encoder)
    try context.encode(to: encoder)
  }

  /// A property of the context.
  package subscript<Value>(dynamicMember keyPath: KeyPath<Context, Value>) -> Value {
    context[keyPath: keyPath]
  }
}
