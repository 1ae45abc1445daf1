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


def _first_processor(cpuinfo):
    """The "name: value" fields of the first processor in `cpuinfo` (a
    dict; empty where the file does not exist, as on macOS and Windows)."""
    fields = {}
    if not os.path.exists(cpuinfo):
        return fields
    with open(cpuinfo, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                if fields:
                    break
                continue
            name, _, value = line.partition(":")
            fields.setdefault(name.strip(), value.strip())
    return fields


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The flags of the first processor in `cpuinfo` (a set; empty where the
    file does not exist)."""
    fields = _first_processor(cpuinfo)
    return set(fields.get("flags", fields.get("Features", "")).split())


def cpu_model(cpuinfo="/proc/cpuinfo"):
    """The first processor's model name with its family and model numbers,
    e.g. "AMD EPYC (family 25, model 17)" (a virtual machine often shows
    only the vendor's brand, and the numbers tell the generation: Zen 4
    here); "" where `cpuinfo` says nothing. Benchmarks record it: the same
    flags run at different speeds on different generations."""
    fields = _first_processor(cpuinfo)
    name = fields.get("model name", "")
    numbers = [f"{label} {fields[key]}" for key, label in (("cpu family", "family"),
                                                          ("model", "model")) if fields.get(key)]
    if name and numbers:
        return f"{name} ({', '.join(numbers)})"
    return name


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
