import ArgumentParser
import Foundation
import MediaCache

/// `mediacache proxy` (placeholder, being written).
struct ProxyCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "proxy", abstract: "Serves cached media over local HTTP.")
}
