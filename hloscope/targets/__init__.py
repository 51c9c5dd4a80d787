"""Compile train steps for a GPU this machine does not have (`--target h100|a100|PATH`) and bound them by a roofline.

Entry points: `compile_for_target(...)` (hloscope.targets.compile), `resolve_target(...)` (hloscope.hlo.gpu_spec),
`roofline(...)` / `roofline_for_module_file(...)` (hloscope.hlo.roofline). Importing this package imports no
framework; the JAX and torch_xla graph builders run only inside `compile_for_target`.
"""
