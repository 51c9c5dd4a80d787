"""Build the matcher's graph from a parsed HLO module (hloscope.hlo.model).

The graph holds the entry computation and the bodies of control flow it reaches (while, conditional, call), i.e. what
runs as kernels. Computations that an instruction applies (fusion bodies, reducers, sort comparators) are folded into
that instruction: their own fingerprint becomes its `body`, so two fusions match exactly only when their bodies do.
"""

from __future__ import annotations

from hloscope.diff.graph import Graph, Node, strip_layout
from hloscope.diff.match import fingerprints

CONTROL_FLOW = {"while", "conditional", "call", "async-start"}


def _detail(inst) -> str:
    if inst.opcode == "fusion":
        kind = inst.fusion_kind or ""
        if kind == "kCustom":  # __triton_gemm, __cudnn$fusion, ...
            backend = inst.backend_config.get("fusion_backend_config", {}).get("kind", "")
            return f"{kind}:{backend}"
        return kind
    if inst.opcode == "custom-call":
        return inst.custom_call_target or ""
    attrs = inst.attrs
    if inst.opcode == "compare":
        return attrs.get("direction", "")
    if inst.opcode == "get-tuple-element":
        return attrs.get("index", "")
    return ""


class _Builder:
    def __init__(self, module, prefix: str = "", graph_name: str = ""):
        self.module = module
        self.body_fps: dict[str, str] = {}
        self.prefix, self.graph_name = prefix, graph_name

    def body(self, inst) -> str:
        names = inst.called_computation_names
        if not names or inst.opcode in CONTROL_FLOW:
            return ""
        for name in names:
            if name not in self.body_fps:
                self.computation_fp(name)
        return ",".join(self.body_fps[name] for name in names)

    def computation_fp(self, name: str) -> str:
        """Fingerprint of a called computation's root; its parameters are told apart by number. The computations it
        folds in (fusions in fusions, reducers) are fingerprinted first, callees before callers, without recursion
        (XLA accepts hundreds of nested calls); one met again while it is being walked (a computation calling itself,
        which the HLO reader refuses) counts as ''."""
        if name in self.body_fps:
            return self.body_fps[name]
        computations = self.module.computations_by_name
        entered: set[str] = set()
        stack = [name]
        while stack:
            current = stack[-1]
            if current in self.body_fps:
                stack.pop()
                continue
            comp = computations.get(current)
            if comp is None:
                self.body_fps[current] = ""
                stack.pop()
                continue
            if current not in entered:
                entered.add(current)
                pending = [callee for inst in comp.instructions if inst.opcode not in CONTROL_FLOW
                           for callee in inst.called_computation_names
                           if callee not in self.body_fps and callee not in entered]
                if pending:
                    stack.extend(pending)
                    continue
            self.body_fps[current] = self._fingerprint(comp)
            stack.pop()
        return self.body_fps[name]

    def _fingerprint(self, comp) -> str:
        """The fingerprint of one computation whose folded-in callees are fingerprinted (or being walked: '')."""
        graph = Graph()
        for inst in comp.instructions:
            detail = inst.operand_text.strip() if inst.opcode == "parameter" else _detail(inst)
            names = inst.called_computation_names
            body = "" if not names or inst.opcode in CONTROL_FLOW else ",".join(self.body_fps.get(n, "") for n in names)
            graph.add(Node(key=inst.name, opcode=inst.opcode, shape=strip_layout(inst.shape_text),
                           operands=tuple(inst.operand_names), detail=detail, body=body))
        root = comp.root.name if comp.root is not None else (comp.instructions[-1].name if comp.instructions else "")
        return str(fingerprints(graph).get(root, 0))

    def graph(self) -> Graph:
        graph = Graph()
        entry = self.module.entry
        if entry is None:
            return graph
        pending, seen = [entry], {entry.name}
        while pending:
            comp = pending.pop()
            for inst in comp.instructions:
                op_name = inst.metadata.get("op_name", "")
                graph.add(Node(key=f"{self.prefix}{comp.name}/{inst.name}", opcode=inst.opcode,
                               shape=strip_layout(inst.shape_text),
                               operands=tuple(f"{self.prefix}{comp.name}/{o}" for o in inst.operand_names),
                               op_name=op_name, detail=_detail(inst), body=self.body(inst), name=inst.name,
                               graph=self.graph_name))
                if inst.opcode in CONTROL_FLOW:
                    for name in inst.called_computation_names:
                        callee = self.module.computations_by_name.get(name)
                        if callee is not None and name not in seen:
                            seen.add(name)
                            pending.append(callee)
            if comp is entry and comp.root is not None:
                graph.roots = [f"{self.prefix}{comp.name}/{comp.root.name}"]
        return graph


def graph_from_module(module) -> Graph:
    """The instructions that run (entry plus control-flow bodies), with fused and applied computations folded in."""
    return _Builder(module, graph_name=module.name).graph()


def graph_from_modules(modules: list) -> Graph:
    """One graph holding every module of a train step (torch_xla+compile runs forward, backward and optimizer as
    separate modules): keys are prefixed by the module's position, each node names its module in `graph`, and every
    module's entry root is a root, so that the matcher works across the union as on one module."""
    if len(modules) == 1:
        return graph_from_module(modules[0])
    union = Graph()
    for index, module in enumerate(modules):
        part = _Builder(module, prefix=f"{index}:", graph_name=module.name).graph()
        union.nodes.update(part.nodes)
        union.roots.extend(part.roots)
    return union
