"""The benchmarks' problems: one convolution layer (BenchProblem), written benchdnn-style, one per
line, then an optional name:

    mb1ic64ih56iw56oc64kh3kw3ph1pw1sh1sw1dh1dw1g1 resnet:res2_3x3

Omitted fields take defaults: mb1 g1 sh1 ph0 dh1, iw = ih, kw = kh, sw = sh, pw = ph, dw = dh.
Unlike benchdnn, dilation is PyTorch's (dh1 = no dilation). ``oh``/``ow``, when given, are
checked against the computed output size. ``#`` starts a comment.

Used by ``convcore bench`` (convcore.cli: its suites), ``convcore bench --model``
(convcore.model_bench: a network's conv layers, written as a suite by --write-suite) and the
scripts in tools/ and bench/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Tuple

import convcore
from convcore._shapes import output_size

__all__ = ["BenchProblem", "parse_problem", "parse_suite", "DEFAULT_SUITE"]

# The default suite of `convcore bench`; bench/suites/default.txt in the source tree holds the
# same lines (a test checks it). Batch 1, sized to run in about a minute on 2 CPU cores.
DEFAULT_SUITE = """\
# convcore default benchmark suite (batch 1). Format: see `convcore bench --help`.
mb1ic64ih56oc64kh3ph1       resnet50:res2_3x3
mb1ic128ih28oc128kh3ph1     resnet50:res3_3x3
mb1ic256ih14oc256kh3ph1     resnet50:res4_3x3
mb1ic256ih56oc64kh1         resnet50:res2_1x1_reduce
mb1ic128ih56oc128kh3ph1     vgg16:conv2_2
mb1ic32ih112oc32kh3ph1g32   mobilenet:dw_3x3
mb1ic1ih512oc1kh3ph1        single_channel_512x512_3x3
mb1ic3ih224oc64kh7sh2ph3    resnet50:conv1_7x7
mb1ic3ih227oc96kh11sh4      alexnet:conv1_11x11
mb1ic256ih28oc256kh3ph2dh2  deeplab:dilated_3x3
mb1ic128ih56oc128kh3sh2ph1  stride2_3x3
"""


@dataclass
class BenchProblem:
    mb: int
    ic: int
    ih: int
    iw: int
    oc: int
    kh: int
    kw: int
    sh: int = 1
    sw: int = 1
    ph: int = 0
    pw: int = 0
    dh: int = 1
    dw: int = 1
    g: int = 1
    name: str = ""

    @property
    def x_shape(self) -> Tuple[int, int, int, int]:
        return (self.mb, self.ic, self.ih, self.iw)

    @property
    def w_shape(self) -> Tuple[int, int, int, int]:
        return (self.oc, self.ic // self.g, self.kh, self.kw)

    def desc(self) -> convcore.ConvDesc:
        return convcore.ConvDesc(padding=(self.ph, self.pw), stride=(self.sh, self.sw),
                                 dilation=(self.dh, self.dw), groups=self.g)

    def output_hw(self) -> Tuple[int, int]:
        oh = output_size(self.ih, self.ph, self.kh, self.sh, self.dh)
        ow = output_size(self.iw, self.pw, self.kw, self.sw, self.dw)
        return oh, ow

    def flops(self) -> float:
        oh, ow = self.output_hw()
        return 2.0 * self.mb * self.oc * (self.ic // self.g) * self.kh * self.kw * oh * ow

    def descriptor(self) -> str:
        return (f"mb{self.mb}ic{self.ic}ih{self.ih}iw{self.iw}oc{self.oc}kh{self.kh}kw{self.kw}"
                f"ph{self.ph}pw{self.pw}sh{self.sh}sw{self.sw}dh{self.dh}dw{self.dw}g{self.g}")

    @property
    def label(self) -> str:
        return self.name or self.descriptor()


_TOKEN = re.compile(r'(mb|ic|ih|iw|oc|oh|ow|kh|kw|sh|sw|ph|pw|dh|dw|g)(\d+)|n"([^"]*)"|_')
# Fields that default to their partner (iw = ih, ...) and then to a constant.
_PAIRS = [("ih", "iw", None), ("kh", "kw", None), ("sh", "sw", 1), ("ph", "pw", 0), ("dh", "dw", 1)]


def parse_problem(text: str) -> BenchProblem:
    """A BenchProblem from a benchdnn-like line: descriptor, then an optional name."""
    line = text.split("#", 1)[0].strip()
    descriptor, _, name = line.partition(" ")
    fields: Dict[str, int] = {}
    pos = 0
    while pos < len(descriptor):
        m = _TOKEN.match(descriptor, pos)
        if not m:
            raise ValueError(f"cannot parse {descriptor[pos:]!r} in {descriptor!r} (expected "
                             "fields like mb1 ic64 ih56 oc64 kh3 sh1 ph1 dh1 g1)")
        if m.group(1):
            if m.group(1) in fields:
                raise ValueError(f"{m.group(1)} given twice in {descriptor!r}")
            fields[m.group(1)] = int(m.group(2))
        elif m.group(3) is not None:
            name = name or m.group(3)
        pos = m.end()
    for required in ("ic", "oc"):
        if required not in fields:
            raise ValueError(f"{descriptor!r} lacks {required}")
    for first, second, default in _PAIRS:
        if first not in fields and second not in fields:
            if default is None:
                raise ValueError(f"{descriptor!r} lacks {first} (or {second})")
            fields[first] = fields[second] = default
        fields.setdefault(first, fields.get(second, 0))
        fields.setdefault(second, fields[first])
    for key in ("dh", "dw"):
        if fields[key] < 1:
            raise ValueError(f"{key}{fields[key]} in {descriptor!r}: dilation is PyTorch's here, "
                             f"dh1 means no dilation (benchdnn's dh0)")
    expect = {k: fields.pop(k) for k in ("oh", "ow") if k in fields}
    problem = BenchProblem(mb=fields.pop("mb", 1), g=fields.pop("g", 1), name=name.strip(), **fields)
    oh, ow = problem.output_hw()
    if expect.get("oh", oh) != oh or expect.get("ow", ow) != ow:
        raise ValueError(f"{descriptor!r}: oh/ow given as {expect} but the output is {oh}x{ow}")
    return problem


def parse_suite(text: str, source: str = "suite") -> List[BenchProblem]:
    """The problems of a suite file's text (``source`` names it in errors: "file:line: ...")."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.split("#", 1)[0].strip():
            continue
        try:
            problems.append(parse_problem(line))
        except ValueError as e:
            raise ValueError(f"{source}:{number}: {e}") from None
    if not problems:
        raise ValueError(f"{source}: no problems")
    return problems
