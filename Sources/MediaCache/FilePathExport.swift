/// Paths in the public API are `FilePath`s (swift-system), as in NIOFileSystem: re-exported so that an app
/// that imports `MediaCache` can name the type without importing `SystemPackage` itself.
@_exported import struct SystemPackage.FilePath
