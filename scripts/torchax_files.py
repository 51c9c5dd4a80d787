"""Are the files under site-packages/torchax the pinned torchax's own? torch_xla 2.9.0's wheel ships an older torchax
(0.0.6) at the same path, and whichever of the two pip installs last wins. Compares every torchax/*.py file with the
sha256 that torchax's own RECORD lists; exits 1 (and says which files differ) when one does not match."""

from __future__ import annotations

import base64
import csv
import hashlib
import sys
from importlib import metadata
from pathlib import Path


def mismatched_files() -> list[str]:
    distribution = metadata.distribution("torchax")
    record = distribution.read_text("RECORD") or ""
    bad = []
    for row in csv.reader(record.splitlines()):
        if len(row) < 2 or not row[0].startswith("torchax/") or not row[0].endswith(".py") or not row[1]:
            continue
        algorithm, _, expected = row[1].partition("=")
        path = Path(str(distribution.locate_file(row[0])))
        if not path.is_file():
            bad.append(f"{row[0]} (missing)")
            continue
        digest = base64.urlsafe_b64encode(hashlib.new(algorithm, path.read_bytes()).digest()).rstrip(b"=").decode()
        if digest != expected:
            bad.append(row[0])
    return bad


def main() -> int:
    bad = mismatched_files()
    if bad:
        print(f"torchax {metadata.version('torchax')}: {len(bad)} file(s) are not its own (torch_xla's bundled "
              f"torchax overwrote them?): {', '.join(bad[:5])}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
