# SPDX-License-Identifier: Apache-2.0
"""The campaign engine (tb/campaign): seed derivation, serial == distributed, resume, the repro
command, the per-task timeout, a worker killed mid-task, the build-cache key and lock. No Ray:
the distributed runs use the local process pool (Ray runs the same task function)."""

import json
import shlex

import numpy as np
import pytest

from tb.campaign import build as buildcache
from tb.campaign.cli import main as campaign_main
from tb.campaign.core import CampaignDir, repro_command, run_task, task_seed
from tb.campaign.kinds import KINDS, get_kind
from tb.campaign.run import identical, run_campaign

QUIET = {"progress": False, "log": lambda *a: None}


@pytest.mark.parametrize("n", [1, 5, 37])
def test_task_seed_is_the_spawned_child(n):
    kids = np.random.SeedSequence(2911).spawn(n)
    for i, kid in enumerate(kids):
        assert (task_seed(2911, i).generate_state(4) == kid.generate_state(4)).all(), i
    assert not (task_seed(2911, 0).generate_state(4) == task_seed(2912, 0).generate_state(4)).all()
    with pytest.raises(ValueError, match="task index must be a non-negative integer"):
        task_seed(1, -1)


def test_serial_and_two_local_workers_give_identical_results(tmp_path):
    """The activation sweep over a slice around 1.0 (relu, exp, sqrt), and the selftest kind,
    serially in this process and on a pool of 2 processes: the same results, task by task."""
    params = {"functions": "relu,exp,sqrt"}
    n = 1 << 22                                     # 1,024 inputs per task
    first = 0x3F800000 // ((1 << 32) // n)
    for kind, p, nn, tasks in (("activation", params, n, range(first - 2, first + 2)),
                               ("selftest", {}, 6, None)):
        s1, a = run_campaign(kind, n=nn, seed=7, params=p, backend="local", workers=1,
                             tasks=tasks, out=tmp_path / f"{kind}-serial", **QUIET)
        s2, b = run_campaign(kind, n=nn, seed=7, params=p, backend="local", workers=2,
                             tasks=tasks, out=tmp_path / f"{kind}-pool", **QUIET)
        assert len(a) == len(tasks or range(nn)) and identical(a, b), kind
        assert s1["mismatches"] == s2["mismatches"] == 0
    assert a[0]["draws"] != a[1]["draws"]


def test_resume_runs_only_the_missing_tasks(tmp_path):
    out = tmp_path / "c"
    _, a = run_campaign("selftest", n=6, seed=3, tasks=range(0, 3), out=out, workers=1, **QUIET)
    # an interrupted writer leaves a torn last line: ignored, the task runs again
    with open(out / "tasks.jsonl", "a") as fh:
        fh.write('{"task": 3, "kind": "selft')
    logs = []
    s, b = run_campaign("selftest", n=6, seed=3, out=out, workers=1, progress=False,
                        log=logs.append)
    assert "3 already done" in logs[0] and "3 to run" in logs[0]
    assert s["done"] == 6 and sorted(b) == list(range(6))
    assert all(b[i] == a[i] for i in range(3))      # the earlier results, not recomputed
    lines = [json.loads(x) for x in (out / "tasks.jsonl").read_text().splitlines()[:3]]
    assert [r["task"] for r in lines] == [0, 1, 2]
    # another source tree or other parameters: refused, not mixed
    with pytest.raises(ValueError, match="another tree"):
        CampaignDir(KINDS["selftest"], 3, 6, {}, path=out, tree="0" * 16)
    with pytest.raises(ValueError, match="another params"):
        run_campaign("selftest", n=6, seed=3, params={"sleep": 0}, out=out, workers=1, **QUIET)


def test_a_failing_task_prints_the_command_that_reruns_it_alone(tmp_path, capsys):
    params = {"fail": [4]}
    logs = []
    s, res = run_campaign("selftest", n=8, seed=11, params=params, out=tmp_path / "c",
                          workers=1, progress=False, log=logs.append)
    cmd = repro_command(KINDS["selftest"], 11, 4, 8, params)
    assert s["failing"] == [{"task": 4, "status": "fail", "seeds": res[4]["failing_seeds"],
                             "repro": cmd}]
    assert s["mismatches"] == 1 and s["failing_seeds"] == res[4]["failing_seeds"]
    assert any(cmd in x for x in logs)
    argv = shlex.split(cmd)
    assert argv[:3] == ["python", "-m", "tb.campaign"]
    for _ in range(2):      # a re-run always runs, also where it ran before
        rc = campaign_main(argv[3:] + ["--out", str(tmp_path / "alone"), "--quiet"])
        assert rc == 1
        alone = [json.loads(x)
                 for x in (tmp_path / "alone" / "tasks.jsonl").read_text().splitlines()]
        assert len(alone) == 1 and identical({4: alone[0]}, {4: res[4]})


def test_a_hanging_task_times_out_with_its_seed(tmp_path):
    sleep = 30
    r = run_task(KINDS["selftest"], 5, 2, {"n": 4, "sleep": sleep}, timeout=0.2)
    assert r["status"] == "timeout" and r["task"] == 2 and r["seed"] == 5
    assert r["wall_seconds"] < sleep            # cut by the limit, not left to finish


def test_an_exception_in_a_task_is_its_result():
    r = run_task(KINDS["activation"], 1, 0, {"n": 3})          # 3 is not a power of two
    assert r["status"] == "error" and "power of two" in r["detail"] and r["task"] == 0


def test_a_task_never_runs_on_another_source_tree():
    r = run_task(KINDS["selftest"], 1, 0, {"n": 2, "campaign_tree": "0" * 16})
    assert r["status"] == "error" and "changed since the campaign started" in r["detail"]


def test_a_worker_killed_mid_task_is_retried_and_counted_once(tmp_path):
    params = {"die_once": str(tmp_path / "marks"), "die_at": [1]}
    s, res = run_campaign("selftest", n=4, seed=9, params=params, out=tmp_path / "c",
                          workers=2, **QUIET)
    assert (tmp_path / "marks" / "died-1").exists()
    assert sorted(res) == [0, 1, 2, 3] and all(r["status"] == "ok" for r in res.values())
    assert s["instructions"] == 40
    lines = (tmp_path / "c" / "tasks.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["task"] for x in lines) == [0, 1, 2, 3]


def test_build_key_and_lock(tmp_path):
    (tmp_path / "rtl").mkdir()
    (tmp_path / "rtl" / "a.py").write_text("x = 1\n")
    (tmp_path / "top.py").write_text("y = 2\n")
    src = ("rtl", "top.py")

    def key(cfg=None, unit="core", variant=None):
        return buildcache.build_key(cfg or {"pe_rows": 4}, unit, variant, src, tmp_path)
    k0 = key()
    assert k0 == key() and len(k0) == 16
    assert len({k0, key({"pe_rows": 8}), key(unit="fma"), key(variant={"o": 1})}) == 4
    (tmp_path / "rtl" / "a.py").write_text("x = 2\n")       # a changed source: a new key
    k1 = key()
    assert k1 != k0
    (tmp_path / "rtl" / "b.py").write_text("")               # a new source file too
    assert key() != k1

    lock = tmp_path / "builds" / "core-x"
    with buildcache.node_lock(lock):
        with pytest.raises(BlockingIOError):
            with buildcache.node_lock(lock, blocking=False):
                pass
    with buildcache.node_lock(lock, blocking=False):       # released: free again
        pass

    made = []

    def make(name):
        made.append(name)
        return object()
    a = buildcache.node_build("unit", k0, make, out=tmp_path)
    assert buildcache.node_build("unit", k0, make, out=tmp_path) is a
    buildcache.node_build("unit", k1, make, out=tmp_path)
    assert made == [f"unit_{k0}", f"unit_{k1}"]
    assert (tmp_path / "builds" / f"unit-{k0}.done").read_text().strip() == k0


def test_an_unreachable_ray_address_is_refused_in_seconds():
    import socket
    import time

    from tb.campaign.backends import check_address
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                   # a port nothing listens on
    limit = 2.0
    t = time.monotonic()
    with pytest.raises(ConnectionError, match="unreachable"):
        check_address(f"ray://127.0.0.1:{port}", timeout=limit)
    # refused within its own limit (plus process noise), not retried until a Ray start-up
    # timeout: a bound on a hang, not a speed target
    assert time.monotonic() - t < 2 * limit + 1
    with pytest.raises(ValueError, match="RAY_ADDRESS must be host:port"):
        check_address("nowhere")


def test_kinds_pickle_by_reference_and_mutate_reruns_through_synth(tmp_path):
    """A kind travels to a worker process by reference (its functions are module-level); the
    mutate kind lives in synth and its repro command runs ``python -m synth.mutate campaign``."""
    import pickle

    from synth import mutate
    from synth.mutate_campaign import MUTATE
    for k in (*KINDS.values(), MUTATE):
        assert pickle.loads(pickle.dumps(k)) == k, k.name
    assert get_kind(MUTATE) is MUTATE
    with pytest.raises(ValueError, match="campaign kind must be one of"):
        get_kind("mutate")
    cmd = repro_command(MUTATE, 1, 3, 20, {"blocks": "nosuchblock"})
    assert cmd == ("python -m synth.mutate campaign --seed 1 --n 20 --task 3 "
                   "--param blocks=nosuchblock")
    argv = shlex.split(cmd)
    assert argv[:4] == ["python", "-m", "synth.mutate", "campaign"]
    with pytest.raises(ValueError, match="nosuchblock"):     # parsed, then the block refused
        mutate.main(argv[3:] + ["--out", str(tmp_path / "m"), "--quiet"])
