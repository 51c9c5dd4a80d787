"""The environment scripts/setup.sh makes runs the pinned packages: torch_xla 2.9.0's wheel ships an older torchax
(0.0.6) at site-packages/torchax, which overwrote torchax 0.0.13's files in a fresh install (setup.sh puts them back)."""

from __future__ import annotations

import re

from helpers import REPO, python


def test_torchax_files_are_the_pinned_torchax():
    pinned = re.search(r"^torchax==(\S+)", (REPO / "requirements.txt").read_text(), re.M)
    assert pinned, "requirements.txt pins torchax"
    checked = python(REPO / "scripts" / "torchax_files.py")
    assert checked.code == 0, checked.stderr
    # the version the imported package says (torch_xla's copy says 0.0.6), read in a child: importing torchax starts JAX
    version = python("-c", "import torchax; print(torchax.__version__)")
    assert version.code == 0, version.stderr
    assert version.stdout.split()[-1] == pinned.group(1)
