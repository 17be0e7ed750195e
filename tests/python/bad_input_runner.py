"""Runs cases of the bad-input catalogue in this process and writes one JSON line per case.

``python bad_input_runner.py RESULTS.jsonl WORKDIR [CASE_ID...]`` (test_bad_inputs.py
starts it under a memory and CPU cap). Each case gets a time limit (SIGALRM); the line for
a case is written before it starts (``"started"``) and after it ends, so a crash of the
whole process (an abort in the engine, the memory cap) names the case it happened in.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _local  # noqa: E402,F401  (this worktree's python/sojourn first)
import bad_input_catalogue as cat  # noqa: E402
import sojourn  # noqa: E402
import sojourn.cli  # noqa: E402

CASE_SECONDS = 20


class CaseTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise CaseTimeout()


def deep_dict(n: int) -> dict:
    d: dict = {}
    root = {"duration": "1s", "x": d}
    for _ in range(n):
        d["a"] = {}
        d = d["a"]
    return root


def cyclic_dict() -> dict:
    d: dict = {"duration": "1s"}
    d["self"] = d
    return d


def with_(base: dict, dotted: str, value) -> dict:
    import copy

    d = copy.deepcopy(base)
    cur = d
    parts = dotted.split(".")
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return d


def setup(work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    base = work / "base.toml"
    base.write_text(cat.BASE_TOML)
    sweep = work / "base.sweep.toml"
    sweep.write_text(f'base = "{base}"\nrepeats = 1\n')
    return {"base": str(base), "sweepfile": str(sweep)}


def case_paths(work: Path, case: "cat.Case") -> dict:
    d = work / "cases" / case.id
    d.mkdir(parents=True, exist_ok=True)
    keep = d / "afile"
    keep.write_text("keep me\n")
    return {"dir": d, "out": d / "out", "file": keep}


def argv_of(case: "cat.Case", common: dict, p: dict) -> list:
    d: Path = p["dir"]
    subs = {"{base}": common["base"], "{sweepfile}": common["sweepfile"], "{out}": str(p["out"]),
            "{tmp}": str(d), "{file}": str(p["file"])}

    def sub(x: str) -> str:
        for k, v in subs.items():
            x = x.replace(k, v)
        return x

    if case.kind == "set":
        return ["run", common["base"], "--out", str(p["out"]), "--quiet", "--no-report", "--set", case.arg]
    if case.kind == "toml":
        text = case.arg
        if isinstance(text, str) and "{fifo}" in text:  # a named pipe where a file is expected (used to hang `validate`)
            fifo = d / "trace.fifo"
            if not fifo.exists():
                os.mkfifo(fifo)
            text = text.replace("{fifo}", str(fifo))
        if case.trace is not None:
            t = d / "trace.txt"
            t.write_bytes(case.trace)
            text = text.replace("{trace}", str(t))
        f = d / "exp.toml"
        f.write_bytes(text if isinstance(text, bytes) else text.encode())
        return ["run", str(f), "--out", str(p["out"]), "--quiet", "--no-report"]
    if case.kind == "sweep":
        f = d / "s.sweep.toml"
        f.write_text(case.arg.replace("{base}", common["base"]))
        return ["sweep", str(f), "--out", str(p["out"]), "--quiet", "--jobs", "1"]
    if case.kind == "cli":
        return [sub(a) for a in case.arg]
    raise ValueError(case.kind)


def snapshot(d: Path) -> dict:
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            q = Path(root) / n
            out[str(q.relative_to(d))] = q.read_bytes() if q.is_file() else None
    return out


def run_case(case: "cat.Case", common: dict, work: Path) -> dict:
    p = case_paths(work, case)
    rec: dict = {"id": case.id}
    out_io, err_io = io.StringIO(), io.StringIO()
    signal.signal(signal.SIGALRM, _alarm)
    try:
        if case.kind == "api":
            before = snapshot(p["dir"])
            env = {"sojourn": sojourn, "BASE": cat.BASE_DICT, "BASE_FILE": common["base"], "OUT": str(p["out"]),
                   "TMP": str(p["dir"]), "SWEEP_FILE": common["sweepfile"], "deep_dict": deep_dict,
                   "cyclic_dict": cyclic_dict, "with_": with_}
            signal.alarm(CASE_SECONDS)
            try:
                eval(case.arg, env)
                rec.update(rc=0, stderr="(no exception)")
            except sojourn.ConfigError as e:
                rec.update(rc=2, stderr=f"sojourn: {e}\n")
        else:
            argv = argv_of(case, common, p)
            before = snapshot(p["dir"])
            signal.alarm(CASE_SECONDS)
            with contextlib.redirect_stdout(out_io), contextlib.redirect_stderr(err_io):
                try:
                    rc = sojourn.cli.main(argv)
                except SystemExit as e:
                    rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            rec.update(rc=rc, stderr=err_io.getvalue(), stdout=out_io.getvalue()[:2000])
    except CaseTimeout:
        rec.update(rc=None, error=f"hang: more than {CASE_SECONDS} s")
    except BaseException:
        rec.update(rc=None, error=traceback.format_exc()[-3000:], stderr=err_io.getvalue())
    finally:
        signal.alarm(0)
    after = snapshot(p["dir"])
    rec["left"] = sorted(k for k in after if k not in before or after[k] != before[k])
    return rec


def main() -> None:
    results, work = Path(sys.argv[1]), Path(sys.argv[2])
    wanted = set(sys.argv[3:])
    common = setup(work)
    with results.open("a") as f:
        for case in cat.CASES:
            if wanted and case.id not in wanted:
                continue
            f.write(json.dumps({"id": case.id, "started": True}) + "\n")
            f.flush()
            rec = run_case(case, common, work)
            f.write(json.dumps(rec) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
