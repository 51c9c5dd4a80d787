"""The environment scripts/setup.sh makes runs the pinned packages: torch_xla 2.9.0's wheel ships an older torchax
(0.0.6) at site-packages/torchax, which overwrote torchax 0.0.13's files in a fresh install (setup.sh puts them back)."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import REPO


def test_torchax_files_are_the_pinned_torchax():
    pinned = re.search(r"^torchax==(\S+)", (REPO / "requirements.txt").read_text(), re.M)
    assert pinned, "requirements.txt pins torchax"
    checked = subprocess.run([sys.executable, str(REPO / "scripts" / "torchax_files.py")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    # the version the imported package says (torch_xla's copy says 0.0.6), read in a child: importing torchax starts JAX
    version = subprocess.run([sys.executable, "-c", "import torchax; print(torchax.__version__)"], capture_output=True,
                             text=True, check=True).stdout.split()[-1]
    assert version == pinned.group(1)
