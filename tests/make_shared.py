"""Make one of the test session's shared runs (helpers.SHARED_MAKERS) in the background, under the same file lock as
conftest's made_once: `python tests/make_shared.py SHARED_FOLDER NAME`. tests/conftest.py starts it; a failure leaves
no mark, so the first test that needs the run makes it again and reports why it failed."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import SHARED_MAKERS, made_once_in

if __name__ == "__main__":
    shared, name = Path(sys.argv[1]), sys.argv[2]
    made_once_in(shared, name, SHARED_MAKERS[name])
