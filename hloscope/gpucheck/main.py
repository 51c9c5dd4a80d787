"""The steps of `scripts/gpu-check.sh`, in order, each in its own process; every result goes into one folder.

    python -m hloscope.gpucheck --out DIR [--dry-run] [--modes pytorch,jax] [--max-mb 10] [--budget-s S]

A step that fails, crashes or times out is recorded as FAIL with the end of its stderr (`logs/`), and the next step
runs. SUMMARY.md and summary.json are rewritten after every step, so an interrupted check keeps what it found. Exit
code 1 when any check failed, else 0. With `--budget-s S` the optional steps (the smoke test, the fp32 and bf16
comparisons) start only within S seconds and are SKIPped after; no step runs past S + BUDGET_GRACE_S. docs/gpu-check.md
says what each check means.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from hloscope.errors import InputError
from hloscope.gpucheck import checks
from hloscope.gpucheck.checks import FAIL, Check
from hloscope.modes import BY_NAME, MODES, TRACE_KINETO
from hloscope.runs.records import ComparisonRecord, Timing
from hloscope.runs.rundir import load_comparison, load_run

# Every mode that runs on a CUDA GPU with the pinned versions (the registry's `devices`).
GPU_MODES = ",".join(mode.name for mode in MODES if "cuda" in mode.devices)
# One mode of each trace format, the ones the timing probe drives: eager PyTorch (Kineto, synchronous on the CPU) and
# the first XLA mode that runs on a GPU (xplane, HLO, replay). They are also the dry run's modes: together they cover
# every check, and the CPU of a CI machine compiles pytorch+compile in minutes under load.
PROBED_MODES = (next(m.name for m in MODES if m.trace_format == TRACE_KINETO and not m.compile),
                next(m.name for m in MODES if m.xla and "cuda" in m.devices))
DRY_RUN_MODES = ",".join(PROBED_MODES)
MAX_MB = 8.0
# With --budget-s: how long past the budget the required steps may still run; a step is killed at that hard end, and a
# step due after it is not started (its check then FAILs: it was not verified).
BUDGET_GRACE_S = 120.0

# The packages whose versions the summary records: every mode's (the registry's), then what they and hloscope need.
PACKAGES = (*dict.fromkeys(package for mode in MODES for package in mode.packages), "jaxlib", "tokenizers",
            "huggingface-hub", "numpy", "click", "rich", "msgspec", "ijson", "isal")
# The environment as the checks need it: versions, CUDA builds, what each framework sees. Never fails: errors are facts.
ENV_PROBE = r"""
PACKAGES = __PACKAGES__
import json, importlib.metadata as md
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
out = {name.replace('-', '_'): version(name) for name in PACKAGES}
# jax's CUDA plugin: CUDA 13's (a jax >= 0.7 built for CUDA 13) or CUDA 12's, whichever is installed
out['jax_cuda_plugin'] = out['jax_cuda_plugin_name'] = None
for name in ('jax-cuda13-plugin', 'jax-cuda12-plugin'):
    if version(name):
        out['jax_cuda_plugin'], out['jax_cuda_plugin_name'] = version(name), name
        out['jax_cuda_pjrt'] = version(name.replace('plugin', 'pjrt'))
        break
import sys
import hloscope
out['python'] = sys.version.split()[0]
out['hloscope_from'] = hloscope.__file__  # the source tree when PYTHONPATH names it (no install)
try:
    import torch
    out['torch_cuda'] = torch.version.cuda
    out['torch_cuda_available'] = torch.cuda.is_available()
    out['torch_device_name'] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
except Exception as error:
    out['torch_error'] = str(error).splitlines()[0]
try:
    import jax
    out['jax_backend'] = jax.default_backend()
    out['jax_devices'] = [str(d) for d in jax.devices()]
except Exception as error:
    out['jax_error'] = str(error).splitlines()[0]
print(json.dumps(out))
""".replace("__PACKAGES__", repr(PACKAGES))


@dataclass
class Plan:
    """What to run: the GPU check, or its dry run on the CPU with the tiny preset."""

    dry_run: bool
    modes: list[str]
    device: str
    main_label: str
    main_args: list[str]
    smoke_args: list[str] | None
    extra: list[tuple[str, list[str]]]  # other comparisons: precision variants (timing only)
    probe_steps: int
    replay_steps: int
    probe_chunk: int = 5


def make_plan(dry_run: bool, modes: str | None) -> Plan:
    chosen = (modes or (DRY_RUN_MODES if dry_run else GPU_MODES)).split(",")
    common = ["--modes", ",".join(chosen), "--no-audit"]
    if dry_run:
        main = ["--model", "vit-tiny", "--batch-size", "8", "--steps", "10", "--warmup", "3", "--precision", "fp32",
                "--device", "cpu", "--dump-hlo", "--profile", "--repeats", "2", *common]
        return Plan(True, chosen, "cpu", "vit-tiny batch 8 fp32 (CPU)", main, None, [], 16, 20, 2)
    smoke = ["--model", "vit-tiny", "--batch-size", "8", "--steps", "10", "--warmup", "3", "--precision", "tf32",
             "--device", "cuda", "--dump-hlo", "--profile", "--repeats", "1", *common]
    base = ["--model", "vit-base", "--batch-size", "32", "--steps", "20", "--warmup", "5", "--device", "cuda"]
    # the fairness audit once, on the seed's configuration
    main = [*base, "--precision", "tf32", "--dump-hlo", "--profile", "--repeats", "2", "--modes", ",".join(chosen)]
    extra = [("vit-base batch 32 fp32", [*base, "--precision", "fp32", "--repeats", "2", *common]),
             ("vit-base batch 32 bf16", [*base, "--precision", "bf16", "--repeats", "1", *common])]
    return Plan(False, chosen, "cuda", "vit-base batch 32 tf32", main, smoke, extra, 30, 50)


@dataclass
class Context:
    out: Path
    plan: Plan
    timeout: float
    budget: float | None = None  # --budget-s
    started: float = field(default_factory=time.monotonic)
    results: list[Check] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    env: dict = field(default_factory=dict)

    def record(self, check: Check) -> None:
        self.results.append(check)
        print(check.line(), flush=True)
        write_summary(self)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def hard_end(self) -> float | None:
        """Seconds since the start after which no step runs (--budget-s plus the grace), or None without a budget."""
        return None if self.budget is None else self.budget + BUDGET_GRACE_S

    def within_budget(self, check_name: str) -> bool:
        """Whether an optional step may start; when it may not, its check is recorded as SKIP with the reason."""
        if self.budget is None or self.elapsed() < self.budget:
            return True
        self.record(checks.skip(check_name, f"time budget: {self.elapsed():.0f} s spent of --budget-s "
                                            f"{self.budget:.0f}"))
        return False


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    seconds: float


def run_step(ctx: Context, name: str, argv: list[str], timeout: float | None = None) -> Ran:
    """One step in its own process group; stdout and stderr kept under logs/. A timeout kills the group."""
    logs = ctx.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    timeout = timeout or ctx.timeout
    hard_end = ctx.hard_end()
    if hard_end is not None:
        left = hard_end - ctx.elapsed()
        if left <= 0:
            ctx.steps.append({"step": name, "argv": argv[2:] if argv[:2] == [sys.executable, "-m"] else argv,
                              "exit": "not started", "seconds": 0.0})
            print(f"-- {name}: not started, past the time budget's hard end", flush=True)
            return Ran(124, "", f"gpu-check: {name} not started: {ctx.elapsed():.0f} s spent, past --budget-s "
                                f"{ctx.budget:.0f} + {BUDGET_GRACE_S:.0f} s\n", 0.0)
        timeout = min(timeout, left)
    env = {**os.environ, "HLOSCOPE_NO_PROGRESS": "1", "COLUMNS": "160"}
    if ctx.plan.dry_run:
        env["PJRT_DEVICE"] = "CPU"
    start = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        code = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        stdout, stderr = process.communicate()
        code = 124
        stderr += f"\ngpu-check: {name} did not finish in {timeout:.0f} s\n"
    seconds = time.monotonic() - start
    slug = name.replace(" ", "-").replace("/", "-")
    (logs / f"{slug}.stdout.log").write_text(stdout)
    (logs / f"{slug}.stderr.log").write_text(stderr)
    ctx.steps.append({"step": name, "argv": argv[2:] if argv[:2] == [sys.executable, "-m"] else argv, "exit": code,
                      "seconds": float(f"{seconds:.1f}")})
    print(f"-- {name}: exit {code} in {seconds:.0f} s", flush=True)
    return Ran(code, stdout, stderr, seconds)


def hloscope(*args: str) -> list[str]:
    return [sys.executable, "-m", "hloscope", *args]


def json_of(ran: Ran) -> dict | None:
    """The step's `--json` output (the last JSON document on stdout), or None when it printed none."""
    text = ran.stdout.strip()
    for start in (0, text.find("\n{"), text.find("\n[")):
        if start < 0:
            continue
        try:
            value = json.loads(text[start:])
        except ValueError:
            continue
        return value if isinstance(value, dict) else {"items": value}
    return None


def save_json(ctx: Context, name: str, value: dict | None) -> None:
    if value is not None:
        folder = ctx.out / "analysis"
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(value, indent=1, default=str))


def tail(text: str, lines: int = 3) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "(no output)"


def comparison_dir(folder: Path) -> Path | None:
    found = sorted(folder.glob("compare-*/comparison.json"))
    return found[-1].parent if found else None


def read_comparison(comparison: Path) -> ComparisonRecord | InputError:
    """The comparison directory's comparison.json, typed, or the error naming the file when it cannot be read."""
    try:
        return load_comparison(comparison)
    except InputError as error:
        return error


def read_timing(run_dir: Path) -> Timing | InputError:
    """The run directory's run.json `timing`, typed, or the error naming the file when it cannot be read."""
    try:
        return load_run(run_dir, check_artifacts=False).timing
    except InputError as error:
        return error


# --------------------------------------------------------------------------------------------------------------- steps

def step_environment(ctx: Context) -> None:
    ran = run_step(ctx, "environment", [sys.executable, "-c", ENV_PROBE], timeout=300)
    ctx.env = json_of(ran) or {"error": tail(ran.stderr)}
    if shutil.which("nvidia-smi"):
        smi = run_step(ctx, "nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                           "--format=csv,noheader"], timeout=60)
        ctx.env["nvidia_smi"] = smi.stdout.strip()
    save_json(ctx, "environment", ctx.env)
    if ctx.plan.dry_run:
        for name in ("env: torch is a CUDA build and sees the GPU",
                     "env: jax runs on the GPU (jaxlib + CUDA plugin; torchax goes through it)"):
            ctx.record(checks.skip(name, "dry run: no GPU (versions are in analysis/environment.json)"))
        return
    ctx.record(checks.check_torch_cuda(ctx.env))
    ctx.record(checks.check_jax_cuda(ctx.env))


def step_torch_xla(ctx: Context) -> None:
    # refused before anything is imported (package metadata only), so this runs on any machine
    ran = run_step(ctx, "torch_xla on cuda", hloscope("run", "--mode", "torch_xla", "--device", "cuda", "--model",
                                                      "vit-tiny", "--out", str(ctx.out / "refused")), timeout=120)
    # an environment without torch_xla (the lent GPU machine's) refuses it as a missing package instead
    installed = "torch_xla" not in ctx.env or ctx.env["torch_xla"] is not None
    ctx.record(checks.check_torch_xla_refused(ran.code, ran.stderr, installed=installed))
    shutil.rmtree(ctx.out / "refused", ignore_errors=True)


def step_compare(ctx: Context, label: str, folder: str, args: list[str]) -> Path | None:
    ran = run_step(ctx, f"compare {folder}", hloscope("compare", *args, "--out", str(ctx.out / folder)))
    comparison = comparison_dir(ctx.out / folder)
    check = checks.check_comparison(label, read_comparison(comparison) if comparison else None, ctx.plan.modes)
    if check.status != FAIL and ran.code != 0:
        check = Check(check.name, FAIL, f"compare exited {ran.code}: {tail(ran.stderr)}")
    elif check.status == FAIL and comparison is None:
        check = Check(check.name, FAIL, f"{check.detail}; compare exited {ran.code}: {tail(ran.stderr)}")
    ctx.record(check)
    return comparison


def run_dir(comparison: Path, mode: str) -> Path | None:
    """The first process's run directory of `mode` in a comparison."""
    record = read_comparison(comparison)
    for entry in record.modes if isinstance(record, ComparisonRecord) else []:
        if entry.mode == mode and entry.replicate in (None, 1) and entry.status == "ok":
            return comparison / entry.dir
    return None


def step_analyses(ctx: Context, comparison: Path) -> None:
    """The invariants on the main comparison: each tool's --json, then the check that reads it."""
    plan, gpu = ctx.plan, not ctx.plan.dry_run
    explain = json_of(run_step(ctx, "explain", hloscope("explain", str(comparison), "--json")))
    save_json(ctx, "explain", explain)
    run_step(ctx, "explain markdown", hloscope("explain", str(comparison), "--format", "md", "-o",
                                               str(ctx.out / "explain.md")))
    ctx.record(checks.check_verdicts(explain))
    device_modes = [m for m in plan.modes if BY_NAME[m].xla] + (
        [m for m in plan.modes if BY_NAME[m].trace_format == TRACE_KINETO] if gpu else [])
    ctx.record(checks.check_ledger(explain, require_device=device_modes))

    traces: dict[str, dict | None] = {}
    for mode in plan.modes:
        folder = run_dir(comparison, mode)
        if folder is None:
            ctx.record(Check(f"{mode}: analyses", FAIL, "no finished run of this mode to analyse"))
            continue
        slug = mode.replace("+", "_")
        traces[mode] = json_of(run_step(ctx, f"trace stats {slug}", hloscope("trace", "stats", str(folder),
                                                                             "--json")))
        save_json(ctx, f"trace-stats.{slug}", traces[mode])
        fmt = BY_NAME[mode].trace_format
        name = f"{mode}: {fmt} trace has GPU kernels on device streams"
        if gpu:
            ctx.record(checks.check_gpu_kernels(mode, traces[mode], fmt))
        else:
            ctx.record(checks.skip(name, "dry run: no GPU (the CPU trace has no device streams)"))
        if BY_NAME[mode].xla:
            hlo = json_of(run_step(ctx, f"hlo stats {slug}", hloscope("hlo", "stats", str(folder), "--json")))
            save_json(ctx, f"hlo-stats.{slug}", hlo)
            if mode == PROBED_MODES[1]:
                ctx.record(checks.check_kernel_count(mode, hlo, traces[mode]))
                replay = json_of(run_step(ctx, f"replay {slug}", hloscope(
                    "replay", str(folder), "--device", plan.device, "--steps", str(plan.replay_steps), "--warmup",
                    "5", "--json")))
                save_json(ctx, f"replay.{slug}", replay)
                ctx.record(checks.check_replay(mode, replay, read_timing(folder), gpu=gpu))
        if mode in PROBED_MODES:
            probe = json_of(run_step(ctx, f"timing probe {slug}", [
                sys.executable, "-m", "hloscope.gpucheck.timing_probe", str(folder), "--steps",
                str(plan.probe_steps), "--warmup", "3", "--chunk", str(plan.probe_chunk)]))
            save_json(ctx, f"timing-probe.{slug}", probe)
            ctx.record(checks.check_sync_timing(mode, probe, gpu=gpu))


# ---------------------------------------------------------------------------------------------------- trim and report

def trim(out: Path, limit_bytes: int) -> list[dict]:
    """Make the folder small enough to copy back. Every analysis has run and its JSON is under analysis/: first the
    saved step inputs (`*.inputs.npz`, replay's loss-trajectory check: ~400 MB on vit-base) go, then, largest first,
    the traces and dumps of later processes (`-r2`...), then those of first processes, until the folder fits.
    run.json, comparison.json, replay.json, logs and the analyses stay. Returns what was removed (also TRIMMED.json)."""
    removed = []

    def remove(path: Path) -> None:
        size = path.stat().st_size
        path.unlink()
        removed.append({"path": str(path.relative_to(out)), "bytes": size})

    for path in sorted(out.rglob("*.inputs.npz")):
        remove(path)
    keep = {"run.json", "comparison.json", "SUMMARY.md", "summary.json", "TRIMMED.json", "explain.md"}
    candidates = [p for p in out.rglob("*") if p.is_file() and p.name not in keep and "analysis" not in p.parts
                  and "logs" not in p.parts and not p.name.startswith("replay")]

    def later_process(path: Path) -> bool:  # a run directory of process 2, 3...: `jax-r2`
        return any(re.search(r"-r\d+$", part) for part in path.relative_to(out).parts)

    candidates.sort(key=lambda p: (not later_process(p), -p.stat().st_size))
    total = checks.folder_bytes(out)
    for path in candidates:
        if total <= limit_bytes:
            break
        total -= path.stat().st_size
        remove(path)
    if removed:
        (out / "TRIMMED.json").write_text(json.dumps(removed, indent=1))
    return removed


# the packages whose version the environment probe reads and requirements.txt pins
PINNED = ("torch", "torch_xla", "torchax", "jax", "jaxlib", "flax", "optax", "transformers", "click", "rich",
          "msgspec", "ijson", "isal")


REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements.txt"


def requirement_pins(path: Path = REQUIREMENTS) -> dict[str, str]:
    """`name==version` lines of requirements.txt (extras dropped, names with '_'); empty when it cannot be read."""
    pins = {}
    try:
        text = path.read_text()
    except OSError:
        return {}
    for line in text.splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.-]+)(\[[^]]*\])?\s*==\s*([^\s;#]+)", line)
        if match:
            pins[match[1].lower().replace("-", "_")] = match[3]
    return pins


def pin_differences(env: dict, pins: dict[str, str] | None = None) -> list[str]:
    """The environment's versions that are not requirements.txt's (a local `+cu130` ignored): recorded, not a FAIL."""
    pins = requirement_pins() if pins is None else pins
    found = []
    for name in PINNED:
        pinned, have = pins.get(name), env.get(name)
        if pinned is None:
            continue
        if have is None:
            found.append(f"{name} not installed (pinned {pinned})")
        elif have.split("+")[0] != pinned:
            found.append(f"{name} {have} (pinned {pinned})")
    return found


def write_summary(ctx: Context) -> None:
    counts = {status: sum(c.status == status for c in ctx.results) for status in ("PASS", "FAIL", "SKIP")}
    plan = ctx.plan
    env = ctx.env
    differences = pin_differences(env) if env and "error" not in env else []
    lines = [f"# gpu-check {'dry run (CPU, tiny preset)' if plan.dry_run else 'on ' + str(env.get('nvidia_smi') or 'GPU')}",
             "",
             f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {time.monotonic() - ctx.started:.0f} s so far"
             f"{f' (--budget-s {ctx.budget:.0f})' if ctx.budget is not None else ''}; "
             f"modes {', '.join(plan.modes)}; main comparison {plan.main_label}.",
             f"torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), jax {env.get('jax')}, jaxlib {env.get('jaxlib')}"
             f", {env.get('jax_cuda_plugin_name') or 'jax CUDA plugin'} {env.get('jax_cuda_plugin')}, torchax {env.get('torchax')}, torch_xla "
             f"{env.get('torch_xla')}.",
             f"Versions that differ from requirements.txt's pins: {'; '.join(differences) if differences else 'none'}"
             + (" (timings are those of other framework versions: compare them with runs of the pinned set as "
                "such)." if differences else "."),
             "",
             f"**{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP**",
             "",
             "## Checks",
             ""]
    lines += [f"- {c.line()}" for c in ctx.results]
    lines += ["", "## Steps", "", "| step | exit | seconds |", "|---|---|---|"]
    lines += [f"| {s['step']} | {s['exit']} | {s['seconds']} |" for s in ctx.steps]
    lines += ["", "Analyses as JSON: `analysis/` (environment, explain, trace stats, hlo stats, replay, timing probes); "
              "each step's output: `logs/`; files left out to keep the folder small: `TRIMMED.json`. "
              "Continue on any machine: `hloscope explain <comparison>`, `hloscope hlo stats <run>`. "
              "Checks explained: docs/gpu-check.md.", ""]
    (ctx.out / "SUMMARY.md").write_text("\n".join(lines))
    (ctx.out / "summary.json").write_text(json.dumps({"dry_run": plan.dry_run, "modes": plan.modes,
                                                      "checks": [c.to_dict() for c in ctx.results],
                                                      "steps": ctx.steps, "environment": env,
                                                      "budget_s": ctx.budget, "pin_differences": differences},
                                                     indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: a new traces/gpu-check-<UTC>)")
    parser.add_argument("--dry-run", action="store_true", help="every step on the CPU with the tiny preset")
    parser.add_argument("--modes", default=None, help=f"default {GPU_MODES}; dry run {DRY_RUN_MODES}")
    parser.add_argument("--max-mb", type=float, default=MAX_MB, help="trim the folder to this size")
    parser.add_argument("--timeout", type=float, default=900, help="seconds any one step may take")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start the optional steps (smoke test, fp32 and bf16 comparisons) only within this many "
                             f"seconds, SKIP them after; no step runs past it + {BUDGET_GRACE_S:.0f} s")
    args = parser.parse_args(argv)
    out = args.out or Path("traces") / f"gpu-check-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    if out.exists() and any(out.iterdir()):
        print(f"gpu-check: {out} exists and is not empty; give a new --out", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(out, make_plan(args.dry_run, args.modes), args.timeout, args.budget_s)
    print(f"gpu-check{' --dry-run' if args.dry_run else ''}: {', '.join(ctx.plan.modes)} -> {out}", flush=True)
    step_environment(ctx)
    step_torch_xla(ctx)
    plan = ctx.plan
    if plan.smoke_args is not None and ctx.within_budget("compare vit-tiny smoke test: every mode finished"):
        step_compare(ctx, "vit-tiny smoke test", "smoke", plan.smoke_args)
    comparison = step_compare(ctx, plan.main_label, "main", plan.main_args)
    if comparison is not None:
        step_analyses(ctx, comparison)
    for label, compare_args in plan.extra:
        if ctx.within_budget(f"compare {label}: every mode finished"):
            step_compare(ctx, label, label.split()[-1], compare_args)
    if plan.dry_run:
        ctx.record(checks.skip("compare vit-base batch 32 fp32 and bf16: every mode finished",
                               "dry run: no GPU (the precision variants are GPU runs)"))
    limit = int(args.max_mb * 1e6)
    removed = trim(out, limit)
    ctx.record(checks.check_size(out, limit))
    if removed:
        print(f"-- left out {len(removed)} files ({sum(r['bytes'] for r in removed) / 1e6:.1f} MB): TRIMMED.json")
    failed = [c for c in ctx.results if c.status == FAIL]
    print(f"gpu-check: {len(ctx.results) - len(failed)} of {len(ctx.results)} checks did not fail; summary: "
          f"{out / 'SUMMARY.md'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
