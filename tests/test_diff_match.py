"""The structural matcher on hand-built graphs where the right matching is known."""

from __future__ import annotations

from helpers import python

from hloscope.diff.adapt import graph_from_module
from hloscope.diff.graph import Graph, Node, strip_layout
from hloscope.diff.match import fingerprints, group_by_source, match_graphs
from hloscope.hlo.attribution import layer_of
from hloscope.hlo.parser import parse_hlo_text


def _graph(nodes: list[tuple], roots: list[str]) -> Graph:
    graph = Graph()
    for key, opcode, shape, operands, *rest in nodes:
        op_name = rest[0] if rest else ""
        graph.add(Node(key=key, opcode=opcode, shape=shape, operands=tuple(operands), op_name=op_name, name=key))
    graph.roots = roots
    return graph


def _attention_like(prefix: str, with_transpose: bool) -> Graph:
    p = prefix
    nodes = [
        (f"{p}x", "parameter", "f32[8,16]", []),
        (f"{p}w", "parameter", "f32[16,16]", []),
        (f"{p}b", "parameter", "f32[16]", []),
    ]
    rhs = f"{p}w"
    if with_transpose:
        nodes.append((f"{p}t", "transpose", "f32[16,16]", [f"{p}w"], "model/attention/query/transpose"))
        rhs = f"{p}t"
    nodes += [
        (f"{p}dot", "dot", "f32[8,16]", [f"{p}x", rhs], "model/attention/query/dot"),
        (f"{p}bb", "broadcast", "f32[8,16]", [f"{p}b"]),
        (f"{p}add", "add", "f32[8,16]", [f"{p}dot", f"{p}bb"]),
        (f"{p}exp", "exponential", "f32[8,16]", [f"{p}add"]),
        (f"{p}neg", "negate", "f32[8,16]", [f"{p}x"]),
        (f"{p}out", "tuple", "(f32[8,16],f32[8,16])", [f"{p}exp", f"{p}neg"]),
    ]
    return _graph(nodes, [f"{p}out"])


def test_renamed_graph_with_one_inserted_transpose_matches_everything_else():
    a = _attention_like("a.", with_transpose=False)
    b = _attention_like("zz_", with_transpose=True)
    matching = match_graphs(a, b)
    expected = {k: "zz_" + k[2:] for k in a.nodes}
    assert matching.pairs == expected
    assert matching.only_in_a == []
    assert matching.only_in_b == ["zz_t"]
    groups = group_by_source(b, matching.only_in_b)
    assert [group.to_dict() for group in groups] == [{
        "op_name": "model/attention/query/transpose", "count": 1, "opcodes": {"transpose": 1}, "sources": 1,
        "examples": ["zz_t"]}]


def test_identical_graphs_match_exactly():
    a = _attention_like("a.", with_transpose=True)
    b = _attention_like("b.", with_transpose=True)
    matching = match_graphs(a, b)
    assert matching.pairs == {k: "b." + k[2:] for k in a.nodes}
    assert set(matching.how.values()) == {"exact"}


def test_fingerprint_ignores_names_and_layouts_but_not_shapes():
    a = _graph([("p", "parameter", strip_layout("f32[4,4]{1,0}"), []), ("n", "negate", "f32[4,4]", ["p"])], ["n"])
    b = _graph([("q", "parameter", strip_layout("f32[4,4]{0,1}"), []), ("m", "negate", "f32[4,4]", ["q"])], ["m"])
    c = _graph([("q", "parameter", "f32[4,8]", []), ("m", "negate", "f32[4,8]", ["q"])], ["m"])
    assert fingerprints(a)["n"] == fingerprints(b)["m"]
    assert fingerprints(a)["n"] != fingerprints(c)["m"]


def test_extra_duplicate_work_is_reported_on_its_side_only():
    # B computes the same exp twice (a missed common-subexpression elimination): one exp and its user stay unmatched.
    a = _graph([("p", "parameter", "f32[4]", []), ("e", "exponential", "f32[4]", ["p"], "f/exp"),
                ("r", "add", "f32[4]", ["e", "e"])], ["r"])
    b = _graph([("p", "parameter", "f32[4]", []), ("e1", "exponential", "f32[4]", ["p"], "g/exp"),
                ("e2", "exponential", "f32[4]", ["p"], "g/exp"), ("r", "add", "f32[4]", ["e1", "e2"])], ["r"])
    matching = match_graphs(a, b)
    assert matching.pairs == {"p": "p", "e": "e1", "r": "r"}
    assert matching.only_in_b == ["e2"]
    assert group_by_source(b, ["e2"])[0].op_name == "g/exp"


def test_deep_graph_does_not_recurse():
    chain = [("n0", "parameter", "f32[2]", [])] + [(f"n{i}", "negate", "f32[2]", [f"n{i-1}"]) for i in range(1, 20000)]
    a = _graph(chain, ["n19999"])
    b = _graph(chain, ["n19999"])
    assert len(match_graphs(a, b).pairs) == 20000


def test_groups_fold_layer_indices_and_skip_bookkeeping():
    g = _graph([("t0", "transpose", "f32[2]", [], "jit(f)/layer/0/attn/transpose"),
                ("t1", "transpose", "f32[2]", [], "jit(f)/layer/11/attn/transpose"),
                ("g", "get-tuple-element", "f32[2]", [], "jit(f)/layer/1/attn/transpose"),
                ("c", "copy", "f32[2]", [])], [])
    groups = group_by_source(g, ["t0", "t1", "g", "c"])
    assert [(x.op_name, x.count, x.sources) for x in groups] == [
        ("layer/*/attn/transpose", 2, 2), ("(no source op)", 1, 1)]


def test_source_groups_are_shortened_as_hlo_stats_shortens_them():
    op_name = "jit(train_step)/transpose(jvp(ViT))/vit/encoder/layer/11/attention/attention/dot_general"
    g = _graph([("d", "dot", "f32[2]", [], op_name)], [])
    (group,) = group_by_source(g, ["d"])
    assert group.op_name == "ViT/vit/encoder/layer/*/attention/attention/dot_general (backward)"
    assert layer_of(op_name) == "ViT/vit/encoder/layer/11 (backward)"  # the same path, cut at 5 components


def test_same_work_in_another_arrangement_matches_loosely_and_the_extra_transpose_stays():
    # torch_xla flattens a linear layer's batch dims (f32[136,64]) where JAX keeps them (f32[8,17,64]), and transposes
    # the [out, in] weight first: the dots pair as the same work, the transpose is PyTorch's alone.
    a = _graph([("x", "parameter", "f32[8,17,64]", []), ("w", "parameter", "f32[64,32]", []),
                ("d", "dot", "f32[8,17,32]", ["x", "w"], "jax/dense/dot_general")], ["d"])
    b = _graph([("x", "parameter", "f32[136,64]", []), ("w", "parameter", "f32[32,64]", []),
                ("t", "transpose", "f32[64,32]", ["w"], "aten::t"),
                ("d", "dot", "f32[136,32]", ["x", "t"], "aten::mm")], ["d"])
    matching = match_graphs(a, b)
    assert matching.pairs["d"] == "d" and matching.how["d"] in {"root", "loose"}
    assert matching.pairs["x"] == "x"
    assert matching.only_in_b == ["t"]


_CYCLES = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a walk that loops grows without bound: fail, not swap
from hloscope.diff.graph import Graph, Node
from hloscope.diff.match import fingerprints, match_graphs

def graph(nodes):
    g = Graph()
    for key, opcode, operands in nodes:
        g.add(Node(key=key, opcode=opcode, shape="f32[4]", operands=tuple(operands)))
    g.roots = [nodes[-1][0]]
    return g

looped = graph([("p", "parameter", []), ("a", "add", ["a", "p"])])
fps = fingerprints(looped)
assert set(fps) == {"p", "a"}
assert fps["a"] == hash(("add", "f32[4]", "", "", (0, fps["p"])))  # the operand met again counts as 0
pair = graph([("p", "parameter", []), ("b", "multiply", ["a", "p"]), ("a", "add", ["b", "p"])])
assert set(fingerprints(pair)) == {"p", "a", "b"}
ring = graph([(f"n{i}", "negate", [f"n{(i + 1) % 5000}"]) for i in range(5000)])
assert len(fingerprints(ring)) == 5000
assert len(match_graphs(looped, pair).pairs) >= 1
print("ok")
"""


def test_fingerprints_end_on_graphs_with_cycles():
    """The HLO reader refuses cycles (`a = add(a, a)`), but no graph may make the walk loop: each node is entered
    once, and an operand met again while it is being walked counts as an operand outside the graph (0). In a child
    process under a memory cap and a timeout: the loop this guards against grew without bound."""
    result = python("-c", _CYCLES, timeout=120)
    assert result.code == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def _nested_fusions(depth: int, self_call: bool) -> str:
    """A module whose fusion body calls a fusion whose body calls ... `depth` deep (XLA accepts such chains); with
    `self_call`, the innermost body also calls itself (a cycle the reader refuses, here read without validation)."""
    parts = ["HloModule m\n\n",
             "c0 {\n  x = f32[4]{0} parameter(0)\n" + ("  ROOT y = f32[4]{0} fusion(x), kind=kLoop, calls=c0\n"
                                                      if self_call else "  ROOT y = f32[4]{0} negate(x)\n") + "}\n\n"]
    for i in range(1, depth):
        parts.append(f"c{i} {{\n  x = f32[4]{{0}} parameter(0)\n"
                     f"  ROOT y = f32[4]{{0}} fusion(x), kind=kLoop, calls=c{i - 1}\n}}\n\n")
    parts.append(f"ENTRY main {{\n  p = f32[4]{{0}} parameter(0)\n"
                 f"  ROOT r = f32[4]{{0}} fusion(p), kind=kLoop, calls=c{depth - 1}\n}}\n")
    return "".join(parts)


def test_folded_computations_are_fingerprinted_without_recursion():
    """A fusion's body is folded into its fingerprint, callees first, by a walk with a stack of its own: a chain of
    3,000 nested fusions (deeper than Python's recursion limit) is read, and a body calling itself ends."""
    deep = graph_from_module(parse_hlo_text(_nested_fusions(3000, self_call=False))[0])
    assert len(deep.nodes) == 2 and deep.nodes["main/r"].body
    looped = graph_from_module(parse_hlo_text(_nested_fusions(3, self_call=True))[0])
    assert looped.nodes["main/r"].body
    # the same chain, 3 deep, fingerprints as the recursive definition: each body is its root's fingerprint
    shallow = graph_from_module(parse_hlo_text(_nested_fusions(2, self_call=False))[0])
    inner = Graph()
    inner.add(Node(key="x", opcode="parameter", shape="f32[4]", detail="0"))  # parameters told apart by number
    inner.add(Node(key="y", opcode="negate", shape="f32[4]", operands=("x",)))
    inner_fp = str(fingerprints(inner)["y"])
    outer = Graph()
    outer.add(Node(key="x", opcode="parameter", shape="f32[4]", detail="0"))
    outer.add(Node(key="y", opcode="fusion", shape="f32[4]", operands=("x",), detail="kLoop", body=inner_fp))
    assert shallow.nodes["main/r"].body == str(fingerprints(outer)["y"])
