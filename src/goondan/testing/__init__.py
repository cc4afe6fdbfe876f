"""Test support shipped with goondan, for projects that extend it (for example
:mod:`goondan.testing.store_conformance`, the suite a store backend proves itself with)."""
