"""kerasbert.hardware reads the CPU's bfloat16 kernels from /proc/cpuinfo's
flags and says which precision to pick; `kerasbert info` prints it."""

from kerasbert.hardware import bfloat16_kernels
from kerasbert.hardware import cpu_flags
from kerasbert.hardware import cpu_model
from kerasbert.hardware import precision_advice


def test_flags_and_advice(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: x\nflags\t\t: fpu sse avx512f avx512_bf16 "
                       "amx_tile amx_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    flags = cpu_flags(str(cpuinfo))
    assert {"avx512_bf16", "amx_bf16", "fpu"} <= flags
    assert bfloat16_kernels(flags) == ["amx_bf16", "avx512_bf16"]
    assert "AMX_BF16, AVX512_BF16" in precision_advice(flags)
    assert "faster here" in precision_advice(flags)
    assert "keep float32" in precision_advice({"avx2", "fma"})
    assert cpu_flags(str(tmp_path / "missing")) == set()  # macOS, Windows: no file
    assert "keep float32" in precision_advice(set())


def test_cpu_model(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
                       "model\t\t: 17\nmodel name\t: AMD EPYC\nflags\t\t: fpu\n\n"
                       "processor\t: 1\nmodel name\t: other\n")
    assert cpu_model(str(cpuinfo)) == "AMD EPYC (family 25, model 17)"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU\n")
    assert cpu_model(str(cpuinfo)) == "Some CPU"
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\n")  # aarch64: no model name
    assert cpu_model(str(cpuinfo)) == ""
    assert cpu_flags(str(cpuinfo)) == {"fp", "asimd"}
    assert cpu_model(str(tmp_path / "missing")) == ""


def test_info_prints_the_advice(capsys):
    from kerasbert.cli import main

    assert main(["info", "--preset", "bert_tiny"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == precision_advice()
