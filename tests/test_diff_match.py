"""The structural matcher on hand-built graphs where the right matching is known."""

from __future__ import annotations

from hloscope.diff.graph import Graph, Node, strip_layout
from hloscope.diff.match import fingerprints, group_by_source, match_graphs
from hloscope.hlo.attribution import layer_of


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
