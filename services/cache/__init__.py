"""The cache service: fingerprints of operations and results of succeeded ones."""
