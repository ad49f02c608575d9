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

from hdl.base.errors import FredError
from hdl.base.placement import Strategy, parse_strategy

__all__ = ["Layer", "Workload", "transformer", "resnet152", "WORKLOADS", "get_workload"]

BYTES = 2  # FP16


@dataclass(frozen=True)
class Layer:
    """One layer: ``fwd_flops`` per sample, ``params``, ``out_bytes`` (activation handed to the
    next layer, per sample), ``stored_bytes(mp)`` activation memory kept for backward per
    sample, ``mp_allreduces`` per pass under Megatron-style MP, ``mp_shardable``."""

    name: str
    fwd_flops: float
    params: float
    out_bytes: float
    in_bytes: float
    stored_coeff: tuple[float, float] = (0.0, 0.0)  # stored = a + b / mp bytes per sample
    mp_allreduces: int = 2
    mp_shardable: bool = True

    def stored_bytes(self, mp: int) -> float:
        return self.stored_coeff[0] + self.stored_coeff[1] / mp

    def shards(self, mp: int) -> int:
        """How many ways MP(``mp``) divides this layer's FLOPs and weights (1 when it is not
        MP-shardable)."""
        return mp if self.mp_shardable else 1


@dataclass(frozen=True)
class Workload:
    """A training workload and how the paper runs it.

    ``mode``: ``weight-stationary`` or ``weight-streaming``; ``strategy``: the paper's default;
    ``microbatches``: pipeline microbatches per iteration (per DP replica); ``samples_per_dp``:
    minibatch per DP replica (paper: 16, 40 in the strategy sweep); ``layers_on_wafer``: in
    weight streaming, how many layers' weights a stage holds at once (paper: 2, i.e. double
    buffering)."""

    name: str
    layers: tuple[Layer, ...]
    mode: str
    strategy: Strategy
    microbatches: int = 1
    samples_per_dp: int = 16
    layers_on_wafer: int = 2
    description: str = ""
    hyper: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.mode not in ("weight-stationary", "weight-streaming"):
            raise FredError(f"workload {self.name}: mode must be weight-stationary or weight-streaming")

    @property
    def params(self) -> float:
        return sum(l.params for l in self.layers)

    @property
    def fwd_flops_per_sample(self) -> float:
        return sum(l.fwd_flops for l in self.layers)

    def with_(self, **changes) -> "Workload":
        return replace(self, **changes)


def transformer(*, name: str, layers: int, hidden: int, heads: int, seq: int, vocab: int,
                mode: str, strategy: str, microbatches: int, description: str = "") -> Workload:
    """A GPT-style decoder from hyper-parameters (keyword-only, validated)."""
    for key, value in dict(layers=layers, hidden=hidden, heads=heads, seq=seq, vocab=vocab).items():
        if not isinstance(value, int) or value <= 0:
            raise FredError(f"transformer {name}: {key} must be a positive integer, got {value!r}")
    h, s, a = hidden, seq, heads
    act = s * h * BYTES
    out = [Layer("embedding", fwd_flops=0.0, params=vocab * h, out_bytes=act, in_bytes=s * 4,
                 stored_coeff=(s * 4, 0.0), mp_allreduces=1)]
    for i in range(layers):
        out.append(Layer(f"block{i}", fwd_flops=24 * s * h * h + 4 * s * s * h,
                         params=12 * h * h + 13 * h, out_bytes=act, in_bytes=act,
                         stored_coeff=(s * h * 10, s * h * (24 + 5 * a * s / h))))
    # the tied output head: logits and loss (weights counted in the embedding)
    out.append(Layer("head", fwd_flops=2 * s * h * vocab, params=0.0, out_bytes=0.0, in_bytes=act,
                     stored_coeff=(0.0, s * vocab * 4.0), mp_allreduces=1))
    return Workload(name=name, layers=tuple(out), mode=mode, strategy=parse_strategy(strategy),
                    microbatches=microbatches, description=description,
                    hyper=dict(layers=layers, hidden=hidden, heads=heads, seq=seq, vocab=vocab))


def _conv(cin, cout, k, hout):
    return 2 * k * k * cin * cout * hout * hout, k * k * cin * cout


def resnet152() -> Workload:
    layers = []
    flops, params = _conv(3, 64, 7, 112)
    layers.append(Layer("stem", fwd_flops=flops, params=params + 128, out_bytes=64 * 56 * 56 * BYTES,
                        in_bytes=3 * 224 * 224 * BYTES,
                        stored_coeff=(0.0, (64 * 112 * 112 * 3 + 3 * 224 * 224) * BYTES),
                        mp_allreduces=1))
    cin, size = 64, 56
    for stage, (blocks, width) in enumerate(((3, 64), (8, 128), (36, 256), (3, 512))):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            hout = size // stride
            cout = width * 4
            f1, p1 = _conv(cin, width, 1, size)       # 1x1 reduce (stride in the 3x3)
            f2, p2 = _conv(width, width, 3, hout)     # 3x3
            f3, p3 = _conv(width, cout, 1, hout)      # 1x1 expand
            f, p = f1 + f2 + f3, p1 + p2 + p3 + 2 * (2 * width + cout)  # + BatchNorm
            if b == 0:
                fd, pd = _conv(cin, cout, 1, hout)    # projection shortcut
                f, p = f + fd, p + pd + 2 * cout
            stored = (width * size * size + width * hout * hout + 2 * cout * hout * hout) * BYTES * 3
            layers.append(Layer(f"conv{stage + 2}_{b + 1}", fwd_flops=f, params=p,
                                out_bytes=cout * hout * hout * BYTES, in_bytes=cin * size * size * BYTES,
                                stored_coeff=(0.0, stored), mp_allreduces=1))
            cin, size = cout, hout
    f, p = 2 * 2048 * 1000, 2048 * 1000 + 1000
    layers.append(Layer("fc", fwd_flops=f, params=p, out_bytes=1000 * BYTES, in_bytes=2048 * BYTES,
                        stored_coeff=(0.0, 2048 * 7 * 7 * BYTES), mp_allreduces=1))
    return Workload(name="resnet-152", layers=tuple(layers), mode="weight-stationary",
                    strategy=parse_strategy("MP1-DP20-PP1"), microbatches=1,
                    description="ResNet-152, ImageNet 224x224, DP(20), weight-stationary")


def _presets() -> dict:
    return {
        "resnet-152": resnet152,
        # Turing-NLG-like (paper: 78 layers, hidden 4256, 28 heads); seq 1024 and GPT-2's
        # vocabulary are Turing-NLG's. Strategy: the paper says MP, DP and PP are all used,
        # "non-aligned", with 8 microbatches; MP5-DP2-PP2 is the only factorisation of 20 with
        # all three > 1 and PP > 1 whose MP group does not align with the 4-NPU L1 / 4-wide row.
        "transformer-17b": lambda: transformer(
            name="transformer-17b", layers=78, hidden=4256, heads=28, seq=1024, vocab=50257,
            mode="weight-stationary", strategy="MP5-DP2-PP2", microbatches=8,
            description="Turing-NLG-like 17B, MP5-DP2-PP2, 8 microbatches, weight-stationary"),
        # GPT-3 175B (Brown et al.): 96 layers, hidden 12288, 96 heads, seq 2048.
        "gpt-3": lambda: transformer(
            name="gpt-3", layers=96, hidden=12288, heads=96, seq=2048, vocab=50257,
            mode="weight-streaming", strategy="MP2-DP5-PP2", microbatches=2,
            description="GPT-3 175B, MP2-DP5-PP2, 2 microbatches, weight-streaming"),
        # Megatron-1T-like (Narayanan et al. 2021): 128 layers, hidden 25600, 160 heads, seq 2048.
        "transformer-1t": lambda: transformer(
            name="transformer-1t", layers=128, hidden=25600, heads=160, seq=2048, vocab=51200,
            mode="weight-streaming", strategy="MP1-DP20-PP1", microbatches=1,
            description="Megatron-1T-like, DP(20), weight-streaming"),
    }


WORKLOADS = ("resnet-152", "transformer-17b", "gpt-3", "transformer-1t")
_CACHE: dict = {}


def get_workload(name: str) -> Workload:
    """A preset by name (one of :data:`WORKLOADS`)."""
    presets = _presets()
    if name not in presets:
        raise FredError(f"unknown workload {name!r}; available: {', '.join(WORKLOADS)}")
    if name not in _CACHE:
        _CACHE[name] = presets[name]()
    return _CACHE[name]
