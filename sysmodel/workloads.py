"""Workloads: ResNet-152 (layer table) and a transformer family from hyper-parameters.

A :class:`Workload` is a list of :class:`Layer` (per-sample forward FLOPs, parameters,
output-activation bytes, stored-activation bytes) plus how the paper runs it (execution
mode, strategy, microbatches). All sizes are FP16 (2 bytes per element, the paper's).

Transformer layer costs (per sample of ``seq`` tokens, hidden ``h``, ``a`` heads):
forward FLOPs 24*s*h^2 + 4*s^2*h (QKV, attention scores, attention*V, projection, 4h MLP);
parameters 12*h^2 + 13*h; activation memory for backward s*h*(10 + 24/t + 5*a*s/(h*t)) bytes
with MP degree t (Korthikanti et al., "Reducing activation recomputation", FP16, no
recomputation); Megatron MP: 2 all-reduces of the s*h activation per layer per pass.
The embedding is a layer with V*h parameters and no MP all-reduce on this path; the output
head (logits) shares the embedding's weights (tied) and costs 2*s*h*V FLOPs.

ResNet-152 (He et al. 2016, 224x224 input, bottleneck blocks [3, 8, 36, 3]): one layer per
bottleneck block plus the stem and the classifier, FLOPs = 2*k^2*Cin*Cout*Hout*Wout per
convolution (BatchNorm/ReLU ignored, about 1 % of FLOPs); about 60.2 M parameters and 23 GFLOPs
per image forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hdl.contracts.errors import FredError
from hdl.contracts.placement import Strategy, parse_strategy
from sysmodel.compute import DTYPE_BYTES, Gemm, VectorOp
from sysmodel.model_cache import Ref, current, hash_once

__all__ = ["Layer", "layer_shape", "layer_shapes", "Workload", "transformer", "resnet152", "WORKLOADS",
           "RECOMPUTE", "RECOMPUTE_MODES", "checked_recompute_mode", "MODES", "Gemm", "VectorOp"]

#: Activation recomputation policies: ``auto`` (full recomputation only when the activations
#: would not fit otherwise), ``none``, ``selective`` (the attention core, Korthikanti et al.
#: 2022), ``full`` (every layer's forward again before its backward).
RECOMPUTE = ("auto", "none", "selective", "full")
#: The recomputation a pipeline stage runs (what ``auto`` resolves to), weakest first.
RECOMPUTE_MODES = RECOMPUTE[1:]


def checked_recompute_mode(mode: str) -> str:
    """``mode`` when it is one of :data:`RECOMPUTE_MODES` (a stage's recomputation, as the
    timers take it), else a :class:`FredError` naming it."""
    if mode not in RECOMPUTE_MODES:
        raise FredError(f"a stage's recomputation must be one of {', '.join(RECOMPUTE_MODES)}, got {mode!r}")
    return mode


MODES = ("weight-stationary", "weight-streaming")

BYTES = 2  # FP16


@hash_once   # a layer is a key of the model's layer-time cache: hashed once, not per lookup
@dataclass(frozen=True)
class Layer:
    """One layer: ``fwd_flops`` per sample, ``params``, ``out_bytes`` (activation handed to the
    next layer, per sample), ``stored_bytes(mp)`` activation memory kept for backward per
    sample, ``mp_allreduces`` per pass under Megatron-style MP, ``mp_shardable``.

    ``gemms`` / ``vectors``: the forward work by shape (:mod:`sysmodel.compute`); a layer
    without them is timed by the flat roofline from ``fwd_flops``. ``stored_core``: activation
    bytes per sample of the attention core (divided by MP; dropped by selective
    recomputation, which recomputes them); ``stored_sp``: whether the replicated part of the
    stored activations is split over MP under sequence parallelism."""

    name: str
    fwd_flops: float
    params: float
    out_bytes: float
    in_bytes: float
    stored_coeff: tuple[float, float] = (0.0, 0.0)  # stored = a + b / mp bytes per sample
    mp_allreduces: int = 2
    mp_shardable: bool = True
    gemms: tuple = ()
    vectors: tuple = ()
    stored_core: float = 0.0
    stored_sp: bool = False

    def stored_bytes(self, mp: int, *, sequence_parallel: bool = False,
                     selective: bool = False) -> float:
        a = self.stored_coeff[0] / (mp if sequence_parallel and self.stored_sp else 1)
        return a + self.stored_coeff[1] / mp + (0.0 if selective else self.stored_core / mp)

    def shards(self, mp: int) -> int:
        """How many ways MP(``mp``) divides this layer's FLOPs and weights (1 when it is not
        MP-shardable)."""
        return mp if self.mp_shardable else 1


def layer_shape(layer: Layer) -> Layer:
    """``layer`` without its name: the value its compute time depends on (no compute timer
    reads a name), so that layers of one shape -- a transformer's blocks -- are timed
    once. One object per distinct shape while the model's cache holds it
    (:mod:`sysmodel.model_cache`, ``layer_shapes``), so memos keyed on it hit by identity."""
    shapes = current().layer_shapes
    shape = shapes.get(layer)
    if shape is None:
        unnamed = replace(layer, name="")
        shape = shapes.get(unnamed)
        if shape is None:
            shape = shapes.put(unnamed, unnamed)
        shapes.put(layer, shape)
    return shape


def layer_shapes(workload) -> tuple:
    """:func:`layer_shape` of each of ``workload``'s layers, in order: asked for once per
    workload object while the model's cache holds it (:mod:`sysmodel.model_cache`,
    ``workload_shapes``), so that a builder finds each layer's shape without hashing the
    layer (a task graph asks for every layer of every stage's passes)."""
    memo = current().workload_shapes
    key = Ref(workload)
    shapes = memo.get(key)
    if shapes is None:
        shapes = memo.put(key, tuple(map(layer_shape, workload.layers)))
    return shapes


@dataclass(frozen=True)
class Workload:
    """A training workload and how the paper runs it.

    ``mode``: ``weight-stationary`` or ``weight-streaming``; ``strategy``: the paper's default;
    ``microbatches``: pipeline microbatches per iteration (per DP replica); ``samples_per_dp``:
    minibatch per DP replica (paper: 16, 40 in the strategy sweep); ``layers_on_wafer``: in
    weight streaming, how many layers' weights a stage holds at once (paper: 2, i.e. double
    buffering). ``recompute``: one of :data:`RECOMPUTE`; ``sequence_parallel``: Megatron
    sequence parallelism (LayerNorm/dropout split over MP; its reduce-scatter + all-gather
    move the bytes of the all-reduce they replace); ``interleave``: model chunks per pipeline
    stage (Megatron's interleaved 1F1B schedule); ``dtype``: the GEMMs' data type;
    ``source``: the file it was loaded from; ``pipeline_split``: ``flops`` (stages balanced by
    forward FLOPs) or ``layers`` (Megatron: equal numbers of the inner layers per stage, the
    first and last layer -- embedding, head -- with the first and last stage)."""

    name: str
    layers: tuple[Layer, ...]
    mode: str
    strategy: Strategy
    microbatches: int = 1
    samples_per_dp: int = 16
    layers_on_wafer: int = 2
    description: str = ""
    hyper: dict = field(default_factory=dict)
    recompute: str = "auto"
    sequence_parallel: bool = False
    interleave: int = 1
    dtype: str = "fp16"
    source: str = ""
    pipeline_split: str = "flops"

    def __post_init__(self):
        if self.mode not in MODES:
            raise FredError(f"workload {self.name}: mode must be weight-stationary or weight-streaming")
        if self.recompute not in RECOMPUTE:
            raise FredError(f"workload {self.name}: recompute must be one of {', '.join(RECOMPUTE)}, "
                            f"got {self.recompute!r}")
        if not isinstance(self.sequence_parallel, bool):
            raise FredError(f"workload {self.name}: sequence_parallel must be true or false")
        if isinstance(self.interleave, bool) or not isinstance(self.interleave, int) or self.interleave < 1:
            raise FredError(f"workload {self.name}: interleave must be a positive integer, "
                            f"got {self.interleave!r}")
        if self.pipeline_split not in ("flops", "layers"):
            raise FredError(f"workload {self.name}: pipeline_split must be flops or layers, "
                            f"got {self.pipeline_split!r}")
        if self.dtype not in DTYPE_BYTES:
            raise FredError(f"workload {self.name}: dtype must be one of {', '.join(DTYPE_BYTES)}, "
                            f"got {self.dtype!r}")

    @property
    def params(self) -> float:
        return sum(l.params for l in self.layers)

    @property
    def fwd_flops_per_sample(self) -> float:
        return sum(l.fwd_flops for l in self.layers)

    def with_(self, **changes) -> "Workload":
        return replace(self, **changes)

    def with_microbatches(self, microbatches: int) -> "Workload":
        """This workload with ``microbatches`` microbatches per iteration: one object per
        (workload, count) while the model's cache keeps it (``derived_workloads``), since the
        graph templates key on a workload's identity (:mod:`sysmodel.graph_template`) and a
        sweep asks for the same count for every design or network."""
        return current().derived_workloads.get_or_make(
            (Ref(self), microbatches), lambda: replace(self, microbatches=microbatches))


def transformer(*, name: str, layers: int, hidden: int, heads: int, seq: int, vocab: int,
                mode: str, strategy: str, microbatches: int, description: str = "",
                ffn: int | None = None, **options) -> Workload:
    """A GPT-style decoder from hyper-parameters (keyword-only, validated).

    Per block and sample of ``seq`` tokens (hidden h, ``heads`` a, head size d = h/a, MLP
    width f = ``ffn``, default 4h), the forward GEMMs are QKV (s x 3h x h), attention scores
    (a instances of s x s x d), attention x V (a of s x d x s), projection (s x h x h), MLP up
    (s x f x h) and down (s x h x f): 6sh^2 + 2sh^2 + 4s^2h + 4shf FLOPs (24sh^2 + 4s^2h at
    f = 4h). Megatron MP splits QKV and MLP-up by columns, projection and MLP-down by rows,
    attention by heads. Element-wise work (FP16, bytes moved per sample): scale-mask-softmax
    and attention dropout 9as^2 (read/write 2 B each, 1 B mask; split by heads: the attention
    core), two LayerNorms and two bias-dropout-residual adds 22sh (split only under sequence
    parallelism), bias-GeLU 4sf (split by MP). ``options``: further :class:`Workload` fields
    (``recompute``, ``sequence_parallel``, ``interleave``, ``samples_per_dp``, ...)."""
    for key, value in dict(layers=layers, hidden=hidden, heads=heads, seq=seq, vocab=vocab).items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise FredError(f"transformer {name}: {key} must be a positive integer, got {value!r}")
    f = 4 * hidden if ffn is None else ffn
    if isinstance(f, bool) or not isinstance(f, int) or f <= 0:
        raise FredError(f"transformer {name}: ffn must be a positive integer, got {ffn!r}")
    h, s, a = hidden, seq, heads
    d = h / a
    act = s * h * BYTES
    block_gemms = (Gemm(s, 3 * h, h, shard="n"),
                   Gemm(s, s, d, count=a, shard="count", merge=False, core=True),
                   Gemm(s, d, s, count=a, shard="count", merge=False, core=True),
                   Gemm(s, h, h, shard="k"),
                   Gemm(s, f, h, shard="n"),
                   Gemm(s, h, f, shard="k"))
    block_vectors = (VectorOp(9.0 * a * s * s, "mp", core=True), VectorOp(22.0 * s * h, "sp"),
                     VectorOp(4.0 * s * f, "mp"))
    out = [Layer("embedding", fwd_flops=0.0, params=vocab * h, out_bytes=act, in_bytes=s * 4,
                 stored_coeff=(s * 4, 0.0), mp_allreduces=1,
                 vectors=(VectorOp(2.0 * s * h * BYTES),))]
    for i in range(layers):
        out.append(Layer(f"block{i}", fwd_flops=sum(g.flops for g in block_gemms),
                         params=4 * h * h + 2 * h * f + 9 * h + f, out_bytes=act, in_bytes=act,
                         stored_coeff=(s * h * 10, s * h * 24 * f / (4 * h)),
                         stored_core=5.0 * a * s * s, stored_sp=True,
                         gemms=block_gemms, vectors=block_vectors))
    # the tied output head: logits and loss (weights counted in the embedding)
    out.append(Layer("head", fwd_flops=2 * s * h * vocab, params=0.0, out_bytes=0.0, in_bytes=act,
                     stored_coeff=(0.0, s * vocab * 4.0), mp_allreduces=1,
                     gemms=(Gemm(s, vocab, h, shard="n"),),
                     vectors=(VectorOp(8.0 * s * vocab, "mp"),)))
    return Workload(name=name, layers=tuple(out), mode=mode, strategy=parse_strategy(strategy),
                    microbatches=microbatches, description=description,
                    hyper=dict(layers=layers, hidden=hidden, heads=heads, seq=seq, vocab=vocab,
                               ffn=f), **options)


def _conv(cin, cout, k, hout):
    return 2 * k * k * cin * cout * hout * hout, k * k * cin * cout


def _conv_gemm(cin, cout, k, hout):
    """A convolution as an implicit GEMM: rows = output pixels, cols = output channels,
    reduction = input channels x kernel area."""
    return Gemm(hout * hout, cout, cin * k * k, shard="n")


def resnet152() -> Workload:
    """ResNet-152 from its architecture (see the module docstring). Each convolution is an
    implicit GEMM (:func:`_conv_gemm`); element-wise work per convolution output is BatchNorm
    (statistics read, normalise read + write: 3x the output bytes, ReLU fused), per block
    the residual add + ReLU (read two, write one: 3x the block output)."""
    layers = []
    flops, params = _conv(3, 64, 7, 112)
    layers.append(Layer("stem", fwd_flops=flops, params=params + 128, out_bytes=64 * 56 * 56 * BYTES,
                        in_bytes=3 * 224 * 224 * BYTES,
                        stored_coeff=(0.0, (64 * 112 * 112 * 3 + 3 * 224 * 224) * BYTES),
                        mp_allreduces=1, gemms=(_conv_gemm(3, 64, 7, 112),),
                        # BatchNorm on 64x112x112, max-pool read it and write 64x56x56
                        vectors=(VectorOp((3 * 64 * 112 * 112 + 64 * 112 * 112 + 64 * 56 * 56) * BYTES),)))
    cin, size = 64, 56
    for stage, (blocks, width) in enumerate(((3, 64), (8, 128), (36, 256), (3, 512))):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            hout = size // stride
            cout = width * 4
            f1, p1 = _conv(cin, width, 1, size)       # 1x1 reduce (stride in the 3x3)
            f2, p2 = _conv(width, width, 3, hout)     # 3x3
            f3, p3 = _conv(width, cout, 1, hout)      # 1x1 expand
            gemms = [_conv_gemm(cin, width, 1, size), _conv_gemm(width, width, 3, hout),
                     _conv_gemm(width, cout, 1, hout)]
            outs = width * size * size + width * hout * hout + cout * hout * hout
            f, p = f1 + f2 + f3, p1 + p2 + p3 + 2 * (2 * width + cout)  # + BatchNorm
            if b == 0:
                fd, pd = _conv(cin, cout, 1, hout)    # projection shortcut
                f, p = f + fd, p + pd + 2 * cout
                gemms.append(_conv_gemm(cin, cout, 1, hout))
                outs += cout * hout * hout
            stored = (width * size * size + width * hout * hout + 2 * cout * hout * hout) * BYTES * 3
            layers.append(Layer(f"conv{stage + 2}_{b + 1}", fwd_flops=f, params=p,
                                out_bytes=cout * hout * hout * BYTES, in_bytes=cin * size * size * BYTES,
                                stored_coeff=(0.0, stored), mp_allreduces=1, gemms=tuple(gemms),
                                vectors=(VectorOp(3 * (outs + cout * hout * hout) * BYTES),)))
            cin, size = cout, hout
    f, p = 2 * 2048 * 1000, 2048 * 1000 + 1000
    layers.append(Layer("fc", fwd_flops=f, params=p, out_bytes=1000 * BYTES, in_bytes=2048 * BYTES,
                        stored_coeff=(0.0, 2048 * 7 * 7 * BYTES), mp_allreduces=1,
                        gemms=(Gemm(1, 1000, 2048),),
                        vectors=(VectorOp((2048 * 7 * 7 + 2048) * BYTES),)))  # global average pool
    return Workload(name="resnet-152", layers=tuple(layers), mode="weight-stationary",
                    strategy=parse_strategy("MP1-DP20-PP1"), microbatches=1,
                    description="ResNet-152, ImageNet 224x224, DP(20), weight-stationary")


#: The paper's four workloads; each ships as a workload file ``configs/workloads/<name>.toml``
#: (package data ``sysmodel/configs/workloads``), which says where every value comes from.
WORKLOADS = ("resnet-152", "transformer-17b", "gpt-3", "transformer-1t")
