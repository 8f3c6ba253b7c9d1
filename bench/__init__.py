"""Benchmarks of infopt's own machinery (`make bench`); not part of the installed distribution."""
