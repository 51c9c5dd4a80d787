"""GPU-target analyses on the real deviceless compilations in fixtures/gpu_aot: thunk-sequence parsing and the roofline,
next to XLA's own parser reading the same optimized module (the reference a reader of these files would use).

    .venv/bin/python benches/bench_target.py [FIXTURES_DIR]

Best of 3 per figure; prints a Markdown table (the one in benches/README.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hloscope.hlo.roofline import roofline_for_module_file
from hloscope.hlo.thunks import parse_thunk_sequence


def best_of(n: int, fn) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str]) -> int:
    fixtures = Path(argv[1]) if len(argv) > 1 else REPO.parent / "shared" / "fixtures"
    try:
        from jaxlib import _hlo
    except ImportError:
        _hlo = None
    print("| fixture | HLO MB | thunks | thunk parse s | roofline s (parse + cost) | XLA parser s |")
    print("|---|---|---|---|---|---|")
    for folder in sorted((fixtures / "gpu_aot").iterdir()):
        (hlo,) = folder.glob("*gpu_after_optimizations.txt")
        (thunks,) = folder.glob("*thunk_sequence.txt")
        count = len(parse_thunk_sequence(thunks).thunks)
        parse_s = best_of(3, lambda thunks=thunks: parse_thunk_sequence(thunks))
        roofline_s = best_of(3, lambda hlo=hlo: roofline_for_module_file(hlo))
        text = hlo.read_text()
        xla_s = best_of(3, lambda text=text: _hlo.hlo_module_from_text(text)) if _hlo else float("nan")
        print(f"| {folder.name} | {hlo.stat().st_size / 1e6:.1f} | {count:,} | {parse_s:.3f} | {roofline_s:.2f} | "
              f"{xla_s:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
