"""`hloscope run`: time one mode's training step and write a run directory."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from hloscope.backends import preflight
from hloscope.backends.base import RunOptions, check_settings
from hloscope.backends.driver import execute
from hloscope.cli.options import BATCH_SIZE, HOST_DELAY_MS, PROFILE_STEPS, SEED, SEQ_LEN, STEPS, WARMUP, XLA_FLAGS
from hloscope.models.presets import get_preset
from hloscope.modes import BY_NAME, CLI_CHOICES, COMPILE_MODES, TARGET_MODES, get_mode, mode_name
from hloscope.render.run_tables import compiled_run_table, run_table
from hloscope.runs.layout import RUN_FILE
from hloscope.runs.records import decode_run
from hloscope.runs.rundir import create_run_dir
from hloscope.targets.max_batch import DEFAULT_MAX_COMPILES
from hloscope.targets.run_target import check_target_run, execute_target


def common_options(function=None, *, device_counts: bool = False):
    """Options shared by `run` and `compare` (compare passes them on to every mode). With `device_counts` (compare),
    `--devices` takes a comma-separated list of counts (text, parsed by hloscope.modes.parse_device_counts)."""
    if function is None:
        return lambda decorated: common_options(decorated, device_counts=device_counts)
    devices_help = ("Data parallel over N devices, same global batch (must divide by N); modes that support it: "
                    "docs/run.md. On a CPU-only host: N virtual CPU devices.")
    devices = (click.option("--devices", default="1", show_default=True, metavar="N[,N...]",
                            help=devices_help + " A list (1,2,4) runs every mode at each count, one run each, and "
                                 "explain adds the scaling efficiency from 1 to N devices.")
               if device_counts else
               click.option("--devices", type=click.IntRange(min=1), default=1, show_default=True, help=devices_help))
    options = [
        click.option("--model", default="vit-base", show_default=True,
                     help="Model preset: vit-base (the benchmark's ViT-B/16), vit-small, vit-tiny (CPU tests); text: "
                          "gpt2-small, gpt2-tiny, llama-1b, llama-tiny, bert-base, bert-tiny (docs/run.md)."),
        click.option("--seq-len", type=SEQ_LEN, default=None,
                     help="Tokens per sequence for the text presets (default: the preset's)."),
        click.option("--batch-size", type=BATCH_SIZE, default=32, show_default=True),
        click.option("--steps", type=STEPS, default=50, show_default=True, help="Timed steps."),
        click.option("--warmup", type=WARMUP, default=10, show_default=True,
                     help="Untimed steps before the timed window, counting the first (compiling) step."),
        click.option("--precision", type=click.Choice(["fp32", "tf32", "bf16"]), default="fp32", show_default=True),
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True),
        devices,
        click.option("--data", type=click.Choice(["device", "loader"]), default="device", show_default=True,
                     help="device: a fixed pool of batches already on the device; loader: a torch DataLoader of random "
                          "tensors every step (the input pipeline is part of the step)."),
        click.option("--seed", type=SEED, default=0, show_default=True),
        click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"),
                     show_default=True, help="Output root; each run gets a new directory in it."),
        click.option("--dump-hlo", is_flag=True,
                     help="Keep the train step's HLO / StableHLO / inductor code in <run>/hlo/."),
        click.option("--profile", is_flag=True, help="Profile a few steps after the timed window (xplane / Kineto)."),
        click.option("--profile-steps", type=PROFILE_STEPS, default=6, show_default=True,
                     help="Profiled steps; the first is the profiler's warm-up, marked in run.json `profile`."),
        click.option("--keep-all", is_flag=True, help="With --dump-hlo: also keep LLVM IR, MLIR and object files."),
        click.option("--check-parity", is_flag=True,
                     help="Start every mode from the same weights (the seeded PyTorch model's, converted for Flax) and "
                          "record the first batch's loss and gradient norm before training (run.json `parity`); "
                          "compare checks they agree within a precision-dependent tolerance."),
        click.option("--optimizer", type=click.Choice(["sgd", "adamw"]), default="sgd", show_default=True,
                     help="The optimizer, with the same hyper-parameters in every mode (torch.optim / optax; "
                          "docs/run.md). Recorded in config.optimizer."),
        click.option("--attention", type=click.Choice(["eager", "sdpa", "flash"]), default="eager", show_default=True,
                     help="Attention implementation (transformers' attn_implementation) where the mode supports it; "
                          "refused in one line where it does not."),
        click.option("--inject-host-delay", "inject_host_delay_ms", type=HOST_DELAY_MS, default=0.0, metavar="MS",
                     help="Sleep MS milliseconds on the host before each step's device work is dispatched (every "
                          "step: warm-up, timed, profiled), with nothing in the trace marking it: a known host stall "
                          "for checking what explain finds. Recorded in config.inject_host_delay_ms and as a warning."),
        click.option("--xla-flags", type=XLA_FLAGS, default=None, metavar="FLAGS",
                     help="The run's XLA_FLAGS (the compiler flags of every mode that compiles with XLA), replacing any "
                          "inherited from the shell ('' for none); hloscope still adds its own (dumps, --devices). "
                          "Recorded in config.xla_flags; without it the inherited XLA_FLAGS is kept."),
        click.option("--donate/--no-donate", "donate", default=None,
                     help="Donate the train state to the step (jax.jit's donate_argnums; PyTorch/XLA's parameter "
                          "aliasing) or not; default: the mode's own behaviour (docs/run.md). Refused in one line "
                          "where donation does not apply (eager PyTorch updates the state in place). Recorded in "
                          "config.donate."),
        click.option("--compile-mode", type=click.Choice(list(COMPILE_MODES)), default=None,
                     help="torch.compile's mode, for the modes that call torch.compile (pytorch+compile; "
                          "torch_xla+compile takes only default); refused for the others. Recorded in "
                          "config.compile_mode."),
        click.option("--fullgraph", is_flag=True,
                     help="torch.compile(fullgraph=True): a graph break is an error (pytorch+compile, "
                          "torch_xla+compile); refused for the other modes. Recorded in config.fullgraph."),
        click.option("--threads", type=click.IntRange(min=1), default=None, metavar="N",
                     help="CPU threads the framework may use: the run process's CPU affinity to N CPUs, "
                          "OMP_NUM_THREADS=N and torch.set_num_threads(N), set before the framework starts; at most "
                          "the CPUs this machine gives hloscope. Recorded in config.threads and environment.threads."),
        click.option("--target", default=None, metavar="h100|a100|PATH",
                     help="Do not time: compile the train step for this GPU with XLA's deviceless compile "
                          f"({', '.join(sorted(TARGET_MODES))}) and keep what the compiler says; PATH is a "
                          "GpuTargetConfigProto text file. "
                          "See docs/gpu-target.md."),
        click.option("--max-batch", is_flag=True,
                     help="With --target: also find, by compiling only, the largest batch whose step's peak device "
                          "memory fits the target's (75% of it: what XLA's GPU allocator takes by default), doubling "
                          "from --batch-size until it does not fit, then bisecting."),
        click.option("--max-batch-compiles", type=click.IntRange(min=2, max=64), default=DEFAULT_MAX_COMPILES, show_default=True,
                     metavar="N", help="With --max-batch: at most N compiles (the run's own included)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def build_options(mode: str, **values):
    return RunOptions(mode=mode, model=values["model"], batch_size=values["batch_size"], steps=values["steps"],
                      warmup=values["warmup"], precision=values["precision"], device=values["device"],
                      data=values["data"], seed=values["seed"], dump_hlo=values["dump_hlo"], profile=values["profile"],
                      profile_steps=values["profile_steps"], keep_all=values["keep_all"],
                      target=values.get("target"), check_parity=values.get("check_parity", False),
                      attention=values.get("attention") or "eager", seq_len=values.get("seq_len"),
                      devices=values.get("devices") or 1, optimizer=values.get("optimizer") or "sgd",
                      inject_host_delay_ms=values.get("inject_host_delay_ms") or 0.0,
                      xla_flags=values.get("xla_flags"),
                      max_batch=bool(values.get("max_batch")),
                      max_batch_compiles=values.get("max_batch_compiles") or DEFAULT_MAX_COMPILES,
                      donate=values.get("donate"), compile_mode=values.get("compile_mode"),
                      fullgraph=bool(values.get("fullgraph")), threads=values.get("threads"))


@click.command(name="run")
@click.option("--mode", required=True, type=click.Choice(list(CLI_CHOICES)),
              help="Framework; add --compile-model for torch.compile (inductor for pytorch, openxla for torch_xla).")
@click.option("--compile-model", is_flag=True, help="torch.compile the model (JAX is always jitted).")
@common_options
@click.option("--run-id", default=None, help="Name of the run directory under --out (default: <mode>-<UTC time>).")
@click.option("--json", "as_json", is_flag=True, help="Print run.json to stdout instead of the summary table.")
@click.option("--setup-only", is_flag=True,
              help="Set the mode up and record the settings in effect (run.json status `setup`) without running a "
                   "step: what compare's fairness audit reads before timing.")
def command(mode: str, compile_model: bool, run_id: str | None, as_json: bool, setup_only: bool = False,
            **values) -> None:
    """Time one mode's full training step and record everything in a run directory."""
    _listen_to_sigint_from_compare()

    if mode in BY_NAME:  # a full mode name (`pytorch+compile`) is its framework plus --compile-model
        mode, compile_model = BY_NAME[mode].framework, compile_model or BY_NAME[mode].compile
    mode = mode_name(mode, compile_model)
    get_preset(values["model"], values.get("seq_len"))  # unknown presets fail before a directory is made
    options = build_options(mode, **values)
    preflight(mode, options.device, options.attention, options.devices, options.batch_size, options.preset)
    check_settings(options)
    if options.max_batch and not options.target:
        raise click.UsageError("--max-batch searches by compiling for a GPU: give --target h100|a100|PATH")
    if options.target:
        return _compile_for_target(options, values["out"], run_id, as_json)
    run_dir = create_run_dir(values["out"], run_id, prefix=get_mode(mode).dir_name)
    console = Console(stderr=True)
    console.print(Text.assemble((mode, "bold"), f": {options.model}, batch {options.batch_size}, {options.warmup} "
                                f"warm-up + {options.steps} timed steps -> {run_dir}"), highlight=False)
    try:
        record = _execute(options, run_dir, console, setup_only)
    except BaseException:
        if as_json:  # --json still prints what run.json says (failed / interrupted) before the error line
            _print_run_json(run_dir)
        raise
    if as_json:
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
    elif setup_only:
        click.echo(f"{mode} set up, no step run; settings in effect in {run_dir / 'run.json'}")
    else:
        Console().print(run_table(decode_run(run_dir / RUN_FILE, record)))
        click.echo(f"run directory: {run_dir}")


def _listen_to_sigint_from_compare() -> None:
    """`compare` stops the mode it runs with SIGINT (on its own SIGTERM or SIGHUP). A compare started with SIGINT
    ignored (a background job of a script: `hloscope compare ... &`) passes that on to its children, which would then
    never stop: a child of compare takes SIGINT back as Ctrl-C."""
    if os.environ.get("HLOSCOPE_STOPPED_BY_SIGINT") == "1" and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _print_run_json(run_dir: Path) -> None:
    try:
        sys.stdout.write((run_dir / "run.json").read_text(encoding="utf-8"))
        sys.stdout.flush()
    except OSError:
        pass


def _compile_for_target(options, out: Path, run_id: str | None, as_json: bool) -> None:
    """--target: compile instead of timing (hloscope.targets.run_target); run.json says `compiled`."""
    # bad mode, target file or missing plugin: before any directory
    check_target_run(options.mode, options.target, options.max_batch)
    run_dir = create_run_dir(out, run_id, prefix=get_mode(options.mode).dir_name)
    Console(stderr=True).print(Text.assemble((options.mode, "bold"), f": {options.model}, batch {options.batch_size}, "
                                             f"compiling for {options.target} (not timed) -> {run_dir}"), highlight=False)
    console = Console(stderr=True)

    def searched(point: dict) -> None:
        peak = "-" if point.get("peak_bytes") is None else f"{point['peak_bytes'] / 2**20:,.1f} MiB"
        fits = point.get("fits")
        verdict = (point.get("error") or "failed") if fits is None else ("fits" if fits else "does not fit")
        console.print(f"  --max-batch: batch {point['batch_size']}: {peak}, {verdict}", highlight=False, markup=False)

    record = execute_target(options, options.target, run_dir, on_point=searched)
    if as_json:
        sys.stdout.write(json.dumps(record.to_dict(), indent=2) + "\n")
    else:
        Console().print(compiled_run_table(record))
        click.echo(f"run directory: {run_dir}")


def _execute(options, run_dir: Path, console: Console, setup_only: bool = False) -> dict:
    total = max(options.warmup, 1) + options.steps
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, transient=True, disable=os.environ.get("HLOSCOPE_NO_PROGRESS") == "1")
    with progress:
        task = progress.add_task(f"{options.mode} setting up", total=total)

        def on_step(phase: str, index: int) -> None:
            progress.update(task, advance=1, description=f"{options.mode} {phase}")

        return execute(options, run_dir, on_step=on_step, setup_only=setup_only,
                       warn=lambda message: console.print(Text.assemble(("warning:", "yellow"), f" {message}"),
                                                          highlight=False))
