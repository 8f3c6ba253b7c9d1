"""The layering the design promises, checked on the import graph: the load generator, the
contract probes and the cost model work from data (an Endpoint, FitRequest.kv) and import no
engine adapter, so they work against any server and any engine added later."""

from __future__ import annotations

import subprocess
import sys

MODULES = ("infopt.loadgen.runner", "infopt.loadgen.summary", "infopt.loadgen.standalone",
           "infopt.loadgen.tokens", "infopt.contract.chat", "infopt.costmodel.fit",
           "infopt.costmodel.plan", "infopt.costmodel.roofline")


def test_no_engine_is_imported_by_loadgen_contract_or_costmodel():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in MODULES)
            + "bad = sorted(m for m in sys.modules if m.startswith('infopt.engines'))\n"
            "print(bad)\nsys.exit(1 if bad else 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
