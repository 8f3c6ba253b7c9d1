from infopt.hardware.host import parse_cgroup_cpu_max, parse_cpuinfo

# Two logical CPUs on one physical core each (recorded from this kind of machine, trimmed).
CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
physical id\t: 0
core id\t: 0
flags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512_bf16 amx_tile amx_bf16 hypervisor

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
physical id\t: 0
core id\t: 1
flags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512_bf16 amx_tile amx_bf16 hypervisor
"""

# An SMT pair: two logical CPUs on one core.
CPUINFO_SMT = CPUINFO.replace("core id\t: 1", "core id\t: 0")

ARM = """processor\t: 0
BogoMIPS\t: 48.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve i8mm bf16
"""


def test_parse_cpuinfo_x86():
    model, isa, cores = parse_cpuinfo(CPUINFO)
    assert model == "Intel(R) Xeon(R) Processor"
    assert isa == ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512_bf16",
                   "amx_tile", "amx_bf16"]
    assert cores == 2
    assert parse_cpuinfo(CPUINFO_SMT)[2] == 1


def test_parse_cpuinfo_arm_features():
    _, isa, cores = parse_cpuinfo(ARM)
    assert isa == ["asimd", "sve", "i8mm", "bf16"] and cores is None


def test_cgroup_cpu_max():
    assert parse_cgroup_cpu_max("max 100000\n") is None
    assert parse_cgroup_cpu_max("150000 100000\n") == 1.5
