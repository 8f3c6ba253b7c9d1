"""The kept API-contract results (infopt.contract.kept): INFOPT_CONTRACT_CACHE_DIR moves them, and a
test session keeps its own, so a machine that ran the suite before still probes every engine the
next session starts instead of replaying its tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from infopt.contract import kept as contract
from infopt.specs.contract import CheckStatus, ContractCheck

ROOT = Path(__file__).parents[2]


def _seed(machine: Path, key: str) -> None:
    """A contract table an earlier run left in the machine's cache ($INFOPT_CACHE_DIR)."""
    check = ContractCheck(route="/v1/chat/completions", feature="stream", stream=True,
                          status=CheckStatus.PASS, detail="probed by an earlier run")
    entry = machine / "contract" / f"{key}.json"
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps({"checks": [check.model_dump(mode="json")],
                                 "evidence": {"stream": "{}"}}), encoding="utf-8")


def test_the_contract_cache_goes_where_its_variable_says(tmp_path, monkeypatch):
    machine, own = tmp_path / "machine", tmp_path / "session"
    _seed(machine, "k")
    monkeypatch.setenv("INFOPT_CACHE_DIR", str(machine))
    monkeypatch.setenv("INFOPT_CONTRACT_CACHE_DIR", str(own))
    assert contract.contract_cache() == own
    assert contract._cached("k", tmp_path / "evidence", ()) is None  # the machine's: not read
    check = ContractCheck(route="/v1/models", feature="models", stream=False,
                          status=CheckStatus.PASS, detail="listed")
    contract._store("k2", [check])
    assert (own / "k2.json").is_file() and not (machine / "contract" / "k2.json").exists()
    again = contract._cached("k2", tmp_path / "evidence", ())
    assert again is not None and [c.feature for c in again] == ["models"]
    monkeypatch.delenv("INFOPT_CONTRACT_CACHE_DIR")
    assert contract.contract_cache() == machine / "contract"  # outside tests: the machine's


# What pytest imports first in a session (tests/conftest.py), then what a trial's contract check
# looks up: whether the table the machine kept is replayed, and what the session's cache holds.
_FRESH_SESSION = """
import json, sys
from pathlib import Path
import tests.conftest
from infopt.contract import kept as contract
replayed = contract._cached("seeded", Path(sys.argv[1]), ()) is not None
where = contract.contract_cache()
print(json.dumps({"replayed": replayed, "dir": str(where),
                  "entries": sorted(p.name for p in where.glob("*"))}))
"""


def test_a_fresh_test_session_starts_with_an_empty_contract_cache(tmp_path):
    machine = tmp_path / "machine"
    _seed(machine, "seeded")  # a warm machine: an earlier run kept a table
    env = {k: v for k, v in os.environ.items() if k != "INFOPT_CONTRACT_CACHE_DIR"}
    env.update(INFOPT_CACHE_DIR=str(machine), HOME=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", _FRESH_SESSION, str(tmp_path / "evidence")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert not seen["replayed"]
    assert seen["entries"] == []
    assert not Path(seen["dir"]).is_relative_to(machine)
    assert not (tmp_path / "evidence").exists()
