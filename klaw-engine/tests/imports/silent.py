"""A "server" that reads what it is sent and never answers, not even `initialize`
(klaw-engine/tests/imports.rs: the engine starts anyway and reports it failed)."""

import sys

for _line in sys.stdin:
    pass
