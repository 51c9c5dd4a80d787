"""HLO text from the data model, in XLA's current print style (no `%`, operands without shapes)."""

from __future__ import annotations

from hloscope.hlo.model import HloInstruction, HloModule


def instruction_text(instr: HloInstruction) -> str:
    if instr.opcode in ("constant", "parameter"):
        inside = " ".join(instr.operand_text.split())
    else:
        inside = ", ".join(instr.operand_names)
    attrs = "".join(f", {key}={' '.join(value.split()) if key != 'backend_config' else value}" for key, value in instr.attrs.items())
    root = "ROOT " if instr is instr.computation.root else ""
    shape = " ".join(instr.shape_text.split())
    return f"{root}{instr.name} = {shape} {instr.opcode}({inside}){attrs}"


def module_text(module: HloModule) -> str:
    lines = [module.header or f"HloModule {module.name or 'module'}", ""]
    for comp in module.computations:
        lines.append(f"{'ENTRY ' if comp is module.entry else ''}{comp.name} {{")
        lines.extend("  " + instruction_text(instr) for instr in comp.instructions)
        lines.append("}")
        lines.append("")
    return "\n".join(lines)
