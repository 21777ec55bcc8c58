import Foundation

/// The directory holding the built products (`mediacache`, `mediacache-testhelper`): beside the test bundle.
let productsDirectory: URL = {
  if let explicit = ProcessInfo.processInfo.environment["MEDIACACHE_PRODUCTS_DIR"] {
    return URL(fileURLWithPath: explicit)
  }
  var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
  while url.path != "/" {
    url.deleteLastPathComponent()
    if FileManager.default.isExecutableFile(atPath: url.appendingPathComponent("mediacache").path) {
      return url
    }
  }
  return Bundle.main.bundleURL.deletingLastPathComponent()
}()

func binary(_ name: String) -> String { productsDirectory.appendingPathComponent(name).path }
