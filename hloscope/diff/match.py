"""Structural matching of two instruction graphs whose names share nothing (the approach of XLA's hlo_diff).

1. Exact: every node gets a fingerprint of its whole operand subgraph (opcode, layout-free shape, detail, body and
   the operands' fingerprints, hashed bottom-up). Nodes whose fingerprint is unique on both sides are matched, and so,
   pairwise, is everything below them (identical subgraphs).
2. Greedy, from what is matched: top-down (the i-th operands of a matched pair match when opcode, shape and detail
   agree) and bottom-up (unmatched users of a matched pair that use it at the same operand position and agree in
   opcode, shape and detail); then, ignoring positions, operands or users whose (opcode, shape, detail) is unique
   among the pair's free operands or users on both sides (tuple outputs and commutative operands come in any order).
   Repeated until nothing changes. The graphs' roots are matched first when they agree.
3. Leftover nodes with equal fingerprints are paired in definition order, then step 2 runs again.
4. Loose: what is still free is paired in definition order by opcode, detail, element type and number of elements,
   ignoring how the elements are arranged: the same matmul written as f32[136,64] by one framework and f32[8,17,64]
   by another is the same work. Then step 2 runs again.
Whatever is left is reported as existing only on one side.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from msgspec import UNSET

from hloscope.diff.graph import Graph, Node
from hloscope.diff.report import SourceGroup
from hloscope.hlo.attribution import short_op_name


def fingerprints(graph: Graph) -> dict[str, int]:
    """Bottom-up subgraph fingerprints, computed without recursion (train steps are deep).

    Each node is entered once and pushes its operands once, so the walk is linear in the edges whatever the graph:
    an operand still being walked when it is met again (a cycle, which the HLO reader refuses: `a = add(a, a)`)
    counts as 0, like an operand outside the graph, instead of being pushed again and again."""
    result: dict[str, int] = {}
    nodes = graph.nodes
    entered: set[str] = set()
    for start in nodes:
        if start in result:
            continue
        stack = [start]
        while stack:
            key = stack[-1]
            if key in result:
                stack.pop()
                continue
            node = nodes[key]
            if key not in entered:
                entered.add(key)
                pending = [op for op in node.operands if op in nodes and op not in entered]
                if pending:
                    stack.extend(pending)
                    continue
            result[key] = hash((node.opcode, node.shape, node.detail, node.body,
                                tuple(result.get(op, 0) for op in node.operands)))
            stack.pop()
    return result


_ARRAY = re.compile(r"^([a-z]\w*)\[([\d,]*)\]$")


def _loose_signature(node: Node) -> tuple:
    """Opcode, detail, element type and element count: the shape without its arrangement (tuples stay exact)."""
    match = _ARRAY.match(node.shape)
    if not match:
        return (node.opcode, node.detail, node.shape)
    count = 1
    for dim in filter(None, match.group(2).split(",")):
        count *= int(dim)
    return (node.opcode, node.detail, match.group(1), count)


def _compatible(x: Node, y: Node) -> bool:
    return x.opcode == y.opcode and x.shape == y.shape and x.detail == y.detail


@dataclass
class Matching:
    pairs: dict[str, str] = field(default_factory=dict)  # key in A -> key in B
    how: dict[str, str] = field(default_factory=dict)  # key in A -> "exact" | "top_down" | "bottom_up" | "root"
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Pairs by the stage that made them."""
        return dict(Counter(self.how.values()))


class _Matcher:
    def __init__(self, a: Graph, b: Graph):
        self.a, self.b = a, b
        self.fa, self.fb = fingerprints(a), fingerprints(b)
        self.users_a, self.users_b = a.users(), b.users()
        self.result = Matching()
        self.reverse: dict[str, str] = {}
        self.queue: deque[tuple[str, str]] = deque()

    def pair(self, ka: str, kb: str, how: str) -> bool:
        if ka in self.result.pairs or kb in self.reverse:
            return False
        self.result.pairs[ka] = kb
        self.result.how[ka] = how
        self.reverse[kb] = ka
        self.queue.append((ka, kb))
        return True

    def pair_subgraphs(self, ka: str, kb: str) -> None:
        """Pair two nodes with equal fingerprints and, operand by operand, everything below them."""
        stack = [(ka, kb)]
        while stack:
            x, y = stack.pop()
            if not self.pair(x, y, "exact"):
                continue
            ops_a, ops_b = self.a.nodes[x].operands, self.b.nodes[y].operands
            # Pushed in reverse so that operands pair in order (a shared operand pairs with the first copy).
            stack.extend((p, q) for p, q in reversed(list(zip(ops_a, ops_b)))
                         if p in self.a.nodes and q in self.b.nodes)

    def exact(self, unique_only: bool) -> None:
        groups_a: dict[int, list[str]] = defaultdict(list)
        groups_b: dict[int, list[str]] = defaultdict(list)
        for key, fp in self.fa.items():
            if key not in self.result.pairs:
                groups_a[fp].append(key)
        for key, fp in self.fb.items():
            if key not in self.reverse:
                groups_b[fp].append(key)
        # Largest subgraphs first: in definition order the last nodes are the users, so walk backwards.
        for key in reversed(list(self.a.nodes)):
            fp = self.fa[key]
            if key in self.result.pairs or fp not in groups_b:
                continue
            side_a, side_b = groups_a[fp], groups_b[fp]
            if unique_only and (len(side_a) != 1 or len(side_b) != 1):
                continue
            free_b = [k for k in side_b if k not in self.reverse]
            free_a = [k for k in side_a if k not in self.result.pairs]
            for x, y in zip(free_a, free_b):
                self.pair_subgraphs(x, y)

    def roots(self) -> None:
        ra = [k for k in self.a.roots if k in self.a.nodes]
        rb = [k for k in self.b.roots if k in self.b.nodes]
        if len(ra) == len(rb):
            for x, y in zip(ra, rb):
                if self.a.nodes[x].opcode == self.b.nodes[y].opcode:
                    self.pair(x, y, "root")

    def _signature(self, node: Node) -> tuple:
        return (node.opcode, node.shape, node.detail)

    def _pair_unique(self, keys_a: list[str], keys_b: list[str], how: str) -> None:
        """Pair free nodes whose (opcode, shape, detail) occurs once among `keys_a` and once among `keys_b`: the
        operands of a tuple or of a commutative op, or the users of a value, in whatever order each side has them."""
        free_a = [k for k in dict.fromkeys(keys_a) if k in self.a.nodes and k not in self.result.pairs]
        free_b = [k for k in dict.fromkeys(keys_b) if k in self.b.nodes and k not in self.reverse]
        if not free_a or not free_b:
            return
        by_sig_a: dict[tuple, list[str]] = defaultdict(list)
        by_sig_b: dict[tuple, list[str]] = defaultdict(list)
        for k in free_a:
            by_sig_a[self._signature(self.a.nodes[k])].append(k)
        for k in free_b:
            by_sig_b[self._signature(self.b.nodes[k])].append(k)
        for sig, side_a in by_sig_a.items():
            side_b = by_sig_b.get(sig)
            if side_b and len(side_a) == 1 and len(side_b) == 1:
                self.pair(side_a[0], side_b[0], how)

    def propagate(self) -> None:
        # Everything matched so far seeds the greedy walk.
        self.queue.extend(self.result.pairs.items())
        while self.queue:
            ka, kb = self.queue.popleft()
            na, nb = self.a.nodes[ka], self.b.nodes[kb]
            # Top-down: operands at the same position, then the rest wherever their signature is unambiguous.
            if len(na.operands) == len(nb.operands):
                for p, q in zip(na.operands, nb.operands):
                    if p in self.a.nodes and q in self.b.nodes and _compatible(self.a.nodes[p], self.b.nodes[q]):
                        self.pair(p, q, "top_down")
            self._pair_unique(list(na.operands), list(nb.operands), "top_down")
            # Bottom-up: unmatched users using the pair at the same operand position, then unambiguous ones.
            free_b = [u for u in self.users_b.get(kb, []) if u not in self.reverse]
            if not free_b:
                continue
            for ua in self.users_a.get(ka, []):
                if ua in self.result.pairs:
                    continue
                user_a = self.a.nodes[ua]
                positions = {i for i, op in enumerate(user_a.operands) if op == ka}
                for ub in free_b:
                    user_b = self.b.nodes[ub]
                    if ub in self.reverse or not _compatible(user_a, user_b):
                        continue
                    if positions & {i for i, op in enumerate(user_b.operands) if op == kb}:
                        self.pair(ua, ub, "bottom_up")
                        break
            self._pair_unique(self.users_a.get(ka, []), free_b, "bottom_up")

    def loose(self) -> None:
        free_b: dict[tuple, deque[str]] = defaultdict(deque)
        for key, node in self.b.nodes.items():
            if key not in self.reverse:
                free_b[_loose_signature(node)].append(key)
        for key, node in self.a.nodes.items():
            if key in self.result.pairs:
                continue
            candidates = free_b.get(_loose_signature(node))
            while candidates:
                if self.pair(key, candidates.popleft(), "loose"):
                    break

    def run(self) -> Matching:
        self.exact(unique_only=True)
        self.roots()
        self.propagate()
        self.exact(unique_only=False)
        self.propagate()
        self.loose()
        self.propagate()
        self.result.only_in_a = [k for k in self.a.nodes if k not in self.result.pairs]
        self.result.only_in_b = [k for k in self.b.nodes if k not in self.reverse]
        return self.result


def match_graphs(a: Graph, b: Graph) -> Matching:
    """Match the instructions of `a` to those of `b`; see the module docstring for the stages."""
    return _Matcher(a, b).run()


NO_SOURCE = "(no source op)"
# Instructions that launch nothing and only re-label values: left out of the only-in-one-side report.
BOOKKEEPING = frozenset({"get-tuple-element", "tuple", "bitcast", "parameter", "constant", "after-all"})
_INDEX_COMPONENT = re.compile(r"(?<=/)\d+(?=/|$)")


def source_group(op_name: str) -> str:
    """The source op shortened as `hlo stats` shortens it (JAX's jit/jvp/transpose wrappers unwrapped, `(backward)`
    said; hloscope.hlo.attribution.short_op_name) with numeric path components (layer indices) replaced by '*':
    `jit(f)/transpose(jvp(ViT))/layer/3/mlp/add` -> `ViT/layer/*/mlp/add (backward)`."""
    return _INDEX_COMPONENT.sub("*", short_op_name(op_name)) if op_name else NO_SOURCE


def group_by_source(graph: Graph, keys: list[str], examples: int = 5,
                    ignore: frozenset[str] = BOOKKEEPING, times: dict[str, float] | None = None) -> list[SourceGroup]:
    """Unmatched instructions grouped by source op (layer indices folded together), largest group first.

    Each group: op_name (the folded source op), count, opcodes {opcode: n}, sources (how many distinct op_names, e.g.
    one per layer), graphs {module: n} and a few example instruction names. With `times` (node key -> measured device
    seconds per step), each group also has `time_s`, and the groups are ranked by it instead of by count.
    """
    groups: dict[str, _Group] = {}
    for key in keys:
        node = graph.nodes[key]
        if node.opcode in ignore:
            continue
        name = source_group(node.op_name)
        group = groups.setdefault(name, _Group(name))
        group.count += 1
        group.opcodes[node.opcode] += 1
        group.sources.add(node.op_name)
        group.graphs[node.graph] += 1
        if times is not None:
            group.time_s += times.get(key, 0.0)
        if len(group.examples) < examples:
            group.examples.append(node.name or key)
    if times is not None:
        ranked = sorted(groups.values(), key=lambda g: (-g.time_s, -g.count, g.op_name))
    else:
        ranked = sorted(groups.values(), key=lambda g: (-g.count, g.op_name))
    return [group.result(timed=times is not None) for group in ranked]


@dataclass
class _Group:
    """A group of `group_by_source` while it is filled."""

    op_name: str
    count: int = 0
    opcodes: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    sources: set[str] = field(default_factory=set)
    graphs: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    examples: list[str] = field(default_factory=list)
    time_s: float = 0.0

    def result(self, timed: bool) -> SourceGroup:
        graphs = {name: n for name, n in self.graphs.items() if name}  # hand-built graphs name no module
        return SourceGroup(op_name=self.op_name, count=self.count,
                           opcodes=dict(sorted(self.opcodes.items(), key=lambda kv: (-kv[1], kv[0]))),
                           sources=len(self.sources), examples=self.examples,
                           time_s=self.time_s if timed else UNSET, graphs=graphs or UNSET)
