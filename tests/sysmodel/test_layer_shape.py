"""Layers of one shape timed once (sysmodel.workloads.layer_shape; docs/sysmodel.md, Speed):
the sharing is by value, never by name, and it does not apply where it would change the graph."""

from dataclasses import replace

from sysmodel.model_cache import ModelCache, using
from sysmodel.platform import default_platform
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload
from sysmodel.workloads import layer_shape


def test_equal_layers_but_names_share_one_shape_and_others_do_not():
    with using(ModelCache()):
        layer = get_workload("transformer-17b").layers[1]
        twin = replace(layer, name="another name")
        other = replace(layer, name="x", mp_shardable=not layer.mp_shardable)
        assert layer_shape(layer) is layer_shape(twin)
        assert layer_shape(layer).name == ""
        assert layer_shape(other) is not layer_shape(layer)
        assert layer_shape(other) != layer_shape(layer)


def test_shape_compute_times_a_renamed_layer_as_itself():
    """A layer's time is the same whether its shape was timed first through a twin or not."""
    from sysmodel.compute_timing import compute_timer
    from sysmodel.iteration_plan import plan_iteration
    wl = get_workload("transformer-17b")
    plan = plan_iteration(default_platform(), wl, None)
    layer = wl.layers[1]
    other = replace(layer, name="x", mp_shardable=not layer.mp_shardable)
    with using(ModelCache()):
        alone = compute_timer(plan).layer_s(layer, backward=True)
        alone_other = compute_timer(plan).layer_s(other, backward=True)
    with using(ModelCache()):
        timer = compute_timer(plan)
        timer.layer_s(replace(layer, name="twin"), backward=True)
        assert timer.layer_s(layer, backward=True) == alone
        assert timer.layer_s(other, backward=True) == alone_other != alone


def test_shared_timings_give_the_reference_graph_and_keep_reference_entries():
    """The fast path (timings shared per shape) gives the reference path's figures; the
    reference path (no memo: sharing must not apply) keeps one link entry per MP transfer."""
    p, wl = default_platform(), get_workload("transformer-17b")
    with using(ModelCache()):
        fast = simulate_iteration(p, "fred-d", wl)
    with using(ModelCache()):
        ref = simulate_iteration(p, "fred-d", wl, reference=True)
    assert fast.tasks == ref.tasks
    assert abs(fast.time_s - ref.time_s) <= 1e-9 * ref.time_s
    for k, v in ref.breakdown.items():
        assert abs(fast.breakdown[k] - v) <= 1e-9 * max(abs(v), 1e-30)


def test_a_workloads_shapes_are_its_layers_shapes_asked_once():
    """layer_shapes: each layer's layer_shape in order, the same object for layers of one shape
    (a builder tells them apart by identity), and one tuple per workload object."""
    from sysmodel.workloads import layer_shapes
    with using(ModelCache()):
        wl = get_workload("transformer-17b")
        shapes = layer_shapes(wl)
        assert len(shapes) == len(wl.layers)
        assert all(s is layer_shape(layer) for s, layer in zip(shapes, wl.layers))
        blocks = [s for s, layer in zip(shapes, wl.layers) if layer.name.startswith("block")]
        assert len(blocks) > 2 and all(s is blocks[0] for s in blocks)
        assert layer_shapes(wl) is shapes
        renamed = wl.with_(layers=tuple(replace(layer, name=layer.name + "'") for layer in wl.layers))
        assert layer_shapes(renamed) is not shapes and layer_shapes(renamed) == shapes
