"""What this machine's processor offers for bfloat16, so a user knows which
precision to pick (`kerasbert info` prints it).

TensorFlow's CPU kernels (oneDNN) multiply bfloat16 matrices natively on
x86 processors with AVX512_BF16 (Cooper Lake, Zen 4 and later) or AMX
(Sapphire Rapids and later): there a bert_base forward pass runs about 2x
as fast as in float32. Without them bfloat16 is emulated, slower than
float32. Plain Python (reads /proc/cpuinfo): no TensorFlow import.
"""

import os

#: CPU flags (as Linux's /proc/cpuinfo names them) of native bfloat16
#: matrix kernels.
BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The flags of the first processor in `cpuinfo` (a set; empty where the
    file does not exist, as on macOS and Windows)."""
    if not os.path.exists(cpuinfo):
        return set()
    with open(cpuinfo, encoding="utf-8", errors="replace") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name.strip() in ("flags", "Features"):
                return set(value.split())
    return set()


def bfloat16_kernels(flags=None):
    """The native bfloat16 kernels among the CPU's flags (a sorted list)."""
    flags = cpu_flags() if flags is None else flags
    return sorted(flag for flag in BFLOAT16_FLAGS if flag in flags)


def precision_advice(flags=None):
    """One line: the CPU's bfloat16 kernels and the precision to pick."""
    found = bfloat16_kernels(flags)
    if found:
        return (f"cpu: bfloat16 kernels ({', '.join(found).upper()}): bfloat16 is faster here "
                "(finetune --precision mixed_bfloat16, export --precision bfloat16)")
    return ("cpu: no bfloat16 kernels (AVX512_BF16 / AMX): keep float32 on this CPU "
            "(bfloat16 is emulated, slower); on a GPU bfloat16 is faster")
