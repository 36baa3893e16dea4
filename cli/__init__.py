"""The `ops` command line: test, perf, support, list, merge."""
__version__ = "0.1.0"
