"""Make the test session's every-mode comparison in the background, under the same file lock as conftest's made_once:
`python tests/make_shared.py SHARED_FOLDER`. tests/conftest.py starts it; a failure leaves no mark, so the first test
that reads the comparison makes it again and reports why it failed."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import EVERY_MODE, made_once_in, make_every_mode_comparison

if __name__ == "__main__":
    made_once_in(Path(sys.argv[1]), EVERY_MODE, make_every_mode_comparison)
