"""The command line as typed, on a terminal and off it: tables on a pseudo-terminal 80 columns wide,
the machine-readable form through a pipe, colour and NO_COLOR, `labkit describe`, the -o forms every
command offers, `labkit cluster status`, and completion through bash, zsh and fish themselves with the
scripts `labkit completion SHELL` prints.

Messages are never written here: each test reads the scheduler's words from the JSON of the same run
(another branch may change them) and looks for them in the table.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from labkit.api import dump
from labkit.cluster import connect
from labkit.cluster.processes import identify
from labkit.cluster.snapshot import cluster_state
from tests import builders as b
from tests.cliserver import CliServer
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
BIN = Path(sys.executable).parent
LABKIT = str(BIN / "labkit")
PENDING = "examples/debugging/pending.yaml"
GPU_40GI = "tests/data/scenarios/gpu-40gi.yaml"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    env.update({"TERM": "xterm", "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}, **extra)
    return env


#: the CLI server (tests/cliserver.py) `run_tty` and `run_pipe` fork each command from, while
#: `forked_cli()` is open; without one they start the console script
_SERVERS: list[CliServer] = []


@contextlib.contextmanager
def forked_cli() -> Iterator[CliServer]:
    """Run `run_tty`/`run_pipe` commands in processes forked from one that imported the CLI once
    (each still a fresh process with its own argv, environment, terminal or pipes and exit code);
    `test_the_console_script_answers_like_the_forked_run` holds the two ways to the same output."""
    server = CliServer(_env())
    _SERVERS.append(server)
    try:
        yield server
    finally:
        _SERVERS.remove(server)
        server.close()


@pytest.fixture(scope="module", autouse=True)
def _forked_cli() -> Iterator[None]:
    with forked_cli():
        yield


def _drain(master: int) -> str:
    """Everything written to a pseudo-terminal, read from its master until the last slave closes."""
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def run_tty(*args: str, cols: int = 80, stderr_tty: bool = False, real: bool = False,
            **env: str) -> tuple[int, str, str]:
    """`labkit ARGS` with stdout on a pseudo-terminal `cols` wide, and stderr a pipe (or the same
    terminal: `stderr_tty`): (exit, stdout, stderr). Forked by the CLI server while one is open
    (`forked_cli`), else (or with `real`) the console script."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    if _SERVERS and not real:
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(_drain(master)))
        reader.start()  # drained while the command runs: a full terminal would block it
        try:
            code, _, err = _SERVERS[-1].run("labkit", list(args), env=_env(**env), tty=os.ttyname(slave),
                                            stderr_tty=stderr_tty)
        finally:
            os.close(slave)
            reader.join()
        return code, out[0], "" if stderr_tty else err
    proc = subprocess.Popen([LABKIT, *args], stdout=slave, stderr=slave if stderr_tty else subprocess.PIPE,
                            stdin=subprocess.DEVNULL, cwd=ROOT, env=_env(**env))
    os.close(slave)
    text = _drain(master)
    err = ""
    if proc.stderr is not None:
        err = proc.stderr.read().decode()
        proc.stderr.close()
    return proc.wait(), text, err


def run_pipe(*args: str, real: bool = False, **env: str) -> tuple[int, str, str]:
    """`labkit ARGS` with stdout and stderr pipes: forked by the CLI server while one is open, else
    (or with `real`) the console script."""
    if _SERVERS and not real:
        return _SERVERS[-1].run("labkit", list(args), env=_env(**env))
    p = subprocess.run([LABKIT, *args], capture_output=True, text=True, cwd=ROOT, env=_env(**env),
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def _flat(text: str) -> str:
    return " ".join(text.split())


def _fits(text: str, cols: int = 80) -> None:
    too_wide = [line for line in ANSI.sub("", text).splitlines() if len(line) > cols]
    assert not too_wide, f"lines wider than {cols} columns: {too_wide}"


@pytest.fixture(scope="module")
def pending_json() -> dict:
    """The pending example's report through a pipe: JSON, as scripts read it."""
    code, out, err = run_pipe("simulate", "-f", PENDING, "--profile", "workshop")
    assert code == 0, err
    return json.loads(out)


def _why(pod: dict) -> tuple[str, str]:
    """The reason and the first line of the message the scheduler (or the claim controller) gave."""
    warning = [e for e in pod["events"] if e["type"] == "Warning"][-1]
    return pod["reason"] or warning["reason"], warning["message"].splitlines()[0]


def test_pipe_keeps_the_json_contract(pending_json):
    code, out, err = run_pipe("simulate", "-f", PENDING, "--profile", "workshop", "-o", "json")
    assert code == 0 and err == ""  # no progress bar off a terminal
    assert json.loads(out) == pending_json
    assert {p["phase"] for p in pending_json["pods"]} == {"Pending"} and len(pending_json["pods"]) == 4


def test_pending_table_on_a_terminal_has_every_reason_and_message(pending_json):
    code, out, err = run_tty("simulate", "-f", PENDING, "--profile", "workshop", NO_COLOR="1")
    assert code == 0, err
    assert "\x1b[" not in out  # NO_COLOR
    _fits(out)
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "NODE", "PHASE", "REASON"]
    pod_block = out.split("\n\n")[0]
    for pod in pending_json["pods"]:
        reason, message = _why(pod)
        row = next(line for line in lines if line.startswith(pod["name"] + " "))
        assert row.split() == [pod["name"], "<none>", "Pending", reason]
        # the message follows its row, wrapped at 80 columns, whole
        after = pod_block.split(row, 1)[1]
        assert _flat(after).startswith(_flat(message)), (pod["name"], after)
    # each unallocated claim says why, in the words of the pod that waits for it
    claims = out.split("\n\n")[1]
    assert claims.splitlines()[0].split() == ["CLAIM", "STATE", "DEVICES", "RESERVED", "FOR"]
    for claim in pending_json["claims"]:
        pod = next(p for p in pending_json["pods"] if p["name"] == claim["name"])
        reason, message = _why(pod)
        row = next(line for line in claims.splitlines() if line.startswith(claim["name"] + " "))
        assert row.split() == [claim["name"], "pending", "<none>", "-"]
        assert _flat(claims.split(row, 1)[1]).startswith(_flat(f"{reason} (pod {pod['name']}): {message}"))


MISSING_CLAIM = b.yaml_docs(b.pod("needs-a-claim", claims="not-created", command=None))


def test_a_pod_kube_scheduler_does_not_try_yet_says_which_plugin_holds_it(tmp_path):
    """A claim that does not exist: DynamicResources PreEnqueue holds the pod back, so kube-scheduler
    writes no condition and no event; the report's `gate` and the table's message say why, and once the
    claim is applied the pod runs and the gate is gone."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(MISSING_CLAIM)
    code, out, err = run_pipe("simulate", "-f", str(pod), "--profile", "workshop", "-o", "json")
    assert code == 0, err
    (p,) = json.loads(out)["pods"]
    assert (p["phase"], p["reason"], p["events"]) == ("Pending", "", [])
    gate = p["gate"]
    assert (gate["plugin"], gate["extensionPoint"]) == ("DynamicResources", "PreEnqueue")
    assert "default/not-created" in gate["message"], gate
    code, table, err = run_tty("simulate", "-f", str(pod), "--profile", "workshop", NO_COLOR="1")
    assert code == 0, err
    row = next(line for line in table.splitlines() if line.startswith("needs-a-claim "))
    assert row.split() == ["needs-a-claim", "<none>", "Pending"]
    assert _flat(table.split(row, 1)[1]).startswith(_flat(f"DynamicResources PreEnqueue: {gate['message']}"))
    claim = tmp_path / "claim.yaml"
    claim.write_text(b.yaml_docs(b.claim("not-created")))
    code, out, err = run_pipe("simulate", "-f", str(pod), "-f", str(claim), "--profile", "workshop", "-o", "json")
    assert code == 0, err
    (p,) = json.loads(out)["pods"]
    assert (p["phase"], p["gate"]) == ("Running", None)


def test_table_colours_only_on_a_terminal():
    code, out, _ = run_tty("simulate", "-f", GPU_40GI)
    assert code == 0
    assert "\x1b[32mRunning\x1b[0m" in out and "\x1b[1mNAME\x1b[0m" in out
    _fits(out)
    code, out, _ = run_pipe("simulate", "-f", GPU_40GI, "-o", "table")
    assert code == 0 and "\x1b[" not in out
    assert out.splitlines()[1].split() == ["train-a", "dgx-a100-0", "Running"]
    code, out, _ = run_tty("simulate", "-f", GPU_40GI, TERM="dumb")
    assert "\x1b[" not in out


def test_narrow_terminal_cuts_names_not_the_message(pending_json):
    code, out, _ = run_tty("simulate", "-f", PENDING, cols=50, NO_COLOR="1")
    assert code == 0
    _fits(out, 50)
    for pod in pending_json["pods"]:
        assert _flat(_why(pod)[1]) in _flat(out)


def test_wide_and_name(pending_json):
    code, out, _ = run_tty("simulate", "-f", PENDING, "-o", "wide", NO_COLOR="1")
    assert code == 0
    assert out.splitlines()[0].split() == ["NAMESPACE", "NAME", "NODE", "PHASE", "REASON", "DEVICES", "MESSAGE"]
    for pod in pending_json["pods"]:  # one line per pod, the whole message on it
        row = next(line for line in out.splitlines() if line.split()[1:2] == [pod["name"]])
        assert row.endswith(_why(pod)[1])
    code, out, _ = run_tty("simulate", "-f", GPU_40GI, "-o", "wide", NO_COLOR="1")
    assert "gpu=dgx-a100-0/gpu-0" in out.splitlines()[1]
    # -o name with a terminal on stderr too: a progress bar while the sim runs, gone at the end
    code, out, _ = run_tty("simulate", "-f", PENDING, "-o", "name", stderr_tty=True)
    assert code == 0 and "pods scheduled or refused" in out
    lines = [line.split("\r")[-1] for line in out.splitlines()]
    assert [line for line in lines if line.strip() and "pods scheduled or refused" not in line] == ([f"pod/{p['name']}" for p in pending_json["pods"]]
                                + [f"resourceclaim.resource.k8s.io/{c['name']}" for c in pending_json["claims"]])


def test_yaml(pending_json):
    code, out, _ = run_pipe("simulate", "-f", PENDING, "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == pending_json


def test_describe_pod_tells_the_whole_story(pending_json):
    pod = next(p for p in pending_json["pods"] if p["name"] == "too-many")
    code, out, err = run_tty("describe", "pod", "too-many", "-f", PENDING, NO_COLOR="1")
    assert code == 0, err
    _fits(out)
    flat = _flat(out)
    assert out.startswith("Name:         too-many\nNamespace:    default\nNode:         <none>\nStatus:       Pending")
    reason, message = _why(pod)
    assert f"PodScheduled False {reason} {_flat(message)}" in flat
    assert "gpu (claim too-many): not allocated" in out
    # the allocator's explanation per node group: every node named, each with its verdict
    explanation = out.split("Explanation:\n", 1)[1].split("\nEvents:", 1)[0]
    assert re.search(r"allocator on dgx-a100-0: \w+", explanation)
    assert re.search(r"allocator on t4-0, t4-1: \w+", explanation)
    assert "usable" in explanation
    events = out.split("\nEvents:\n", 1)[1]
    for e in pod["events"]:
        assert f"{e['type']} {e['reason']}" in _flat(events) and _flat(e["message"]) in _flat(events)


@pytest.fixture(scope="module")
def state_dump(tmp_path_factory) -> Path:
    """A workshop sim's dump (`labkit snapshot` form): one pod running on a GPU, one Pending."""
    c = connect("sim", "workshop", progress=False)
    c.apply(ROOT / GPU_40GI)
    c.apply(ROOT / PENDING)
    c.wait()
    path = tmp_path_factory.mktemp("dump") / "dump.yaml"
    path.write_text(dump(cluster_state(c), "yaml"))
    return path


def test_describe_claim_from_a_state_dump(state_dump):
    objs = [o for o in yaml.safe_load_all(state_dump.read_text()) if o]
    claim = next(o for o in objs if o["kind"] == "ResourceClaim" and o["metadata"]["name"].startswith("train-a-gpu-"))
    name = claim["metadata"]["name"]
    result = claim["status"]["allocation"]["devices"]["results"][0]
    code, out, err = run_tty("describe", "claim", name, "--state", str(state_dump), NO_COLOR="1")
    assert code == 0, err
    _fits(out)
    assert f"Name:         {name}" in out and "State:        allocated,reserved" in out
    assert f"request gpu: {result['driver']}/{result['pool']}/{result['device']}" in out
    assert "Reserved For: pods/train-a" in out and "Used By:      pod/train-a" in out
    # a Pending claim of the dump: why, from the pod waiting for it, through the restored sim
    code, out, _ = run_tty("describe", "claim", "too-many", "--state", str(state_dump), NO_COLOR="1")
    assert code == 0
    assert "State:        pending" in out and "Why not allocated (pod too-many):" in out
    assert "allocator on t4-0, t4-1:" in out


def test_describe_unknown_name_is_one_line_exit_3(state_dump):
    code, out, err = run_pipe("describe", "pod", "no-such-pod", "--state", str(state_dump))
    assert code == 3 and out == ""
    assert len(err.splitlines()) == 1 and "no-such-pod" in err and "train-a" in err
    code, _, err = run_pipe("describe", "pod", "x")
    assert code == 2 and len(err.splitlines()) == 1 and "-f" in err


ALLOC_CASE = "tests/data/allocator/consumable-capacity/input.yaml"


def test_allocate_table_on_a_terminal_json_through_a_pipe():
    code, out, _ = run_tty("allocate", "-f", ALLOC_CASE, "--node", "node-1", NO_COLOR="1")
    assert code == 0
    _fits(out)
    assert out.splitlines()[0].split() == ["CLAIM", "REQUEST", "DEVICE", "NOTE"]
    assert out.rstrip().endswith("status: allocated")
    code, piped, _ = run_pipe("allocate", "-f", ALLOC_CASE, "--node", "node-1")
    doc = json.loads(piped)
    for claim, alloc in doc["allocations"].items():  # every device of the JSON is in the table
        for r in alloc["devices"]["results"]:
            assert re.search(rf"{re.escape(claim)} +{r['request']} +{r['driver']}/{r['pool']}/{r['device']}", out)


def test_experiment_summary_folds_to_the_terminal_and_shows_progress():
    args = ("experiment", "run", "--fleet", "tiny", "--trace", "synthetic:20", "--policy", "whole-gpu,shared")
    code, piped, err = run_pipe(*args)
    assert code == 0 and err == ""  # no progress bar off a terminal
    header, *rows = piped.splitlines()[1:]
    assert len(header) > 80  # one line per policy: too wide for a terminal
    code, out, _ = run_tty(*args, stderr_tty=True, NO_COLOR="1")
    assert code == 0
    assert "pods placed" in out  # the progress bar, on the terminal's stderr
    table = out[out.index("trace synthetic"):]
    table = table[table.index("\n") + 1:]
    table = "\n".join(line.split("\r")[-1] for line in table.splitlines())  # what a bar left behind
    _fits(table)
    parts = [p.splitlines() for p in table.strip().split("\n\n")]
    assert len(parts) > 1 and all(p[0].split()[0] == "POLICY" for p in parts)
    # the same numbers, part by part, as the one-line-per-policy form (wall-clock columns aside)
    keys = header.split()
    for policy_row in rows:
        piped_cells = dict(zip(keys, policy_row.split(), strict=True))
        for part in parts:
            cols = [h.lower() for h in part[0].split()]
            row = next(line.split() for line in part[1:] if line.split()[0] == piped_cells["policy"])
            for k, v in zip(cols, row, strict=True):
                if k not in ("wall_s", "pods_per_s", "setup_s"):
                    assert piped_cells[k] == v, (k, piped_cells, row)


#: a sample of the commands above: on a terminal (colour, width, NO_COLOR) and through pipes
CONSOLE_SAMPLE = [
    ("tty", ("simulate", "-f", GPU_40GI), {}),
    ("tty", ("simulate", "-f", PENDING, "--profile", "workshop"), {"NO_COLOR": "1", "cols": 50}),
    ("tty", ("describe", "pod", "too-many", "-f", PENDING), {"NO_COLOR": "1"}),
    ("pipe", ("simulate", "-f", PENDING, "--profile", "workshop", "-o", "json"), {}),
    ("pipe", ("describe", "pod", "x"), {}),
]


@pytest.mark.parametrize(("how", "args", "env"), CONSOLE_SAMPLE, ids=lambda v: " ".join(v) if isinstance(v, tuple) else None)
def test_the_console_script_answers_like_the_forked_run(how, args, env):
    """The fast path (forked from the CLI server) gives exactly what the `labkit` a user types gives."""
    run = run_tty if how == "tty" else run_pipe
    assert run(*args, **env) == run(*args, real=True, **env)


BASH = shutil.which("bash") or "/bin/bash"


def complete(line: str) -> list[str]:
    """What bash offers for TAB at the end of `line`, through the script `labkit completion bash` prints."""
    script = r'''
source <(labkit completion bash) || exit 9
COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<<"$COMP_LINE"
[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
complete -p labkit >/dev/null || exit 8
_python_argcomplete labkit "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
'''
    p = subprocess.run([BASH, "-c", script, "bash", line], capture_output=True, text=True, cwd=ROOT, env=_env())
    assert p.returncode == 0, p.stderr
    return [w.strip() for w in p.stdout.splitlines() if w.strip()]


def test_bash_completion(state_dump):
    assert complete("labkit sim") == ["simulate"]
    assert {"--profile", "--state", "--output"} <= set(complete("labkit simulate --"))
    assert {"workshop", "tiny", "mig-lab"} <= set(complete("labkit simulate --profile "))
    assert complete("labkit simulate --profile works") == ["workshop"]
    assert complete("labkit topology --profile dgx-a1") == ["dgx-a100"]  # a node profile
    assert complete(f"labkit describe pod -f {PENDING} too") == ["too-many"]
    assert complete(f"labkit describe claim -f {PENDING} w") == ["wrong-class"]
    claims = complete(f"labkit describe claim --state {state_dump} ")  # the claims in a dump
    assert "too-many" in claims and any(c.startswith("train-a-gpu-") for c in claims)
    assert [w for w in complete("labkit completion ") if not w.startswith("-")] == ["bash", "zsh", "fish"]


ZSH_COMPLETE = r'''
autoload -U compinit && compinit -u -D
source <(labkit completion zsh) || exit 9
[[ ${_comps[labkit]} == _python_argcomplete ]] || exit 8
# what zsh's completion widget would get: _describe receives the candidates as NAME:DESCRIPTION
_describe() { print -rl -- ${(P)2} }
BUFFER=$1; CURSOR=${#BUFFER}
words=(${(z)BUFFER}); [[ $BUFFER == *" " ]] && words+=("")
_python_argcomplete
'''
FISH_COMPLETE = 'labkit completion fish | source; or exit 9; complete -C "$argv[1]"'


def complete_in(shell: str, line: str) -> list[str]:
    """What zsh or fish offers for TAB at the end of `line`, through the script `labkit completion SHELL`
    prints, run by the shell itself (zsh: compinit's compdef registers it and our function answers the
    line as the completion widget would call it; fish: `complete -C`, fish's own completion query)."""
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed (make shell-deps installs it: apt-get install zsh fish)")
    argv = [exe, "-f", "-c", ZSH_COMPLETE, "zsh", line] if shell == "zsh" else [
        exe, "--no-config", "-c", FISH_COMPLETE, line]
    p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=_env())
    assert p.returncode == 0, (p.returncode, p.stderr)
    sep = ":" if shell == "zsh" else "\t"
    return [w.split(sep, 1)[0].strip() for w in p.stdout.splitlines() if w.strip()]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_completion_in_zsh_and_fish(shell, state_dump):
    assert complete_in(shell, "labkit sim") == ["simulate"]
    assert complete_in(shell, "labkit simulate --profile works") == ["workshop"]
    assert {"workshop", "tiny", "mig-lab"} <= set(complete_in(shell, "labkit simulate --profile "))
    claims = complete_in(shell, f"labkit describe claim --state {state_dump} ")  # the claims in a dump
    assert "too-many" in claims and any(c.startswith("train-a-gpu-") for c in claims)


# ---- the -o forms every command that prints objects offers (labkit.output.OBJECT_FORMATS) ----

def test_every_command_that_prints_objects_offers_the_same_output_forms():
    from labkit.cli import build_parser
    from labkit.output import OBJECT_FORMATS

    def outputs(parser, path=()):
        for action in parser._actions:
            if "-o" in action.option_strings:
                yield path, list(action.choices or [])
            for name, sub in (getattr(action, "choices", None) or {}).items() if hasattr(action, "_name_parser_map") else ():
                yield from outputs(sub, (*path, name))

    found = dict(outputs(build_parser()))
    # snapshot's and new-policy's -o is the file they write (documented); every other -o is the shared
    # set (csv: experiments)
    writes_a_file = {("snapshot",), ("experiment", "new-policy")}
    assert set(found) == {("simulate",), ("allocate",), ("cel",), ("cluster",), ("explain",), ("topology",),
                          ("experiment", "run"), ("experiment", "sweep"), ("experiment", "inflation"),
                          ("experiment", "policies"), *writes_a_file}
    for path, choices in found.items():
        if path not in writes_a_file:
            assert choices[:5] == list(OBJECT_FORMATS) and set(choices[5:]) <= {"csv"}, (path, choices)


def test_allocate_name_and_yaml_say_what_the_json_says():
    env = {"LABKIT_DETERMINISTIC_SHAREID": "1"}
    doc = json.loads(run_pipe("allocate", "-f", ALLOC_CASE, "--node", "node-1", **env)[1])
    code, out, _ = run_pipe("allocate", "-f", ALLOC_CASE, "--node", "node-1", "-o", "yaml", **env)
    assert code == 0 and yaml.safe_load(out) == doc
    code, out, _ = run_pipe("allocate", "-f", ALLOC_CASE, "--node", "node-1", "-o", "name")
    assert code == 0 and doc["allocations"]
    assert out.splitlines() == [f"resourceclaim.resource.k8s.io/{k.split('/')[1]}" for k in doc["allocations"]]


def test_cel_name_lists_the_matching_devices(cel_slices):
    slices = cel_slices
    expr = 'device.driver == "gpu.nvidia.com"'
    code, out, _ = run_pipe("cel", expr, "-f", str(slices), "-o", "json")
    doc = json.loads(out)
    assert code == 0 and [r["result"] for r in doc["devices"]] == ["match", "match", "no match"]
    code, out, _ = run_pipe("cel", expr, "-f", str(slices), "-o", "name")
    assert out.splitlines() == ["device/gpu.nvidia.com/node-1/gpu-0", "device/gpu.nvidia.com/node-1/gpu-1"]
    code, out, _ = run_pipe("cel", expr, "-f", str(slices), "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == doc


def test_topology_forms():
    code, out, _ = run_pipe("topology", "--profile", "dgx-a100")  # piped: JSON, as before
    stats = json.loads(out)
    code, y, _ = run_pipe("topology", "--profile", "dgx-a100", "-o", "yaml")
    assert code == 0 and yaml.safe_load(y) == stats
    code, out, _ = run_pipe("topology", "--profile", "dgx-a100", "-o", "name")
    names = out.splitlines()
    assert code == 0 and len(names) == stats["nodes"]
    kinds: dict[str, int] = {}
    for n in names:
        kinds[n.split("/", 1)[0]] = kinds.get(n.split("/", 1)[0], 0) + 1
    assert kinds == stats["kinds"]
    code, out, _ = run_tty("topology", "--profile", "dgx-a100", NO_COLOR="1")
    assert code == 0 and out.splitlines()[1].split() == ["WHAT", "KIND", "COUNT"]
    _fits(out)


def test_experiment_name_and_yaml():
    code, out, _ = run_pipe("experiment", "policies", "-o", "yaml")
    policies = [p["name"] for p in yaml.safe_load(out)["policies"]]
    assert code == 0 and {"whole-gpu", "shared"} <= set(policies)
    code, out, _ = run_pipe("experiment", "policies", "-o", "name")
    assert out.splitlines() == [f"policy/{p}" for p in policies]
    args = ("experiment", "run", "--fleet", "tiny", "--trace", "synthetic:10", "--policy", "whole-gpu,shared")
    code, out, _ = run_pipe(*args, "-o", "yaml")
    doc = yaml.safe_load(out)
    assert code == 0 and [r["policy"] for r in doc["summary"]] == ["whole-gpu", "shared"]
    code, js, _ = run_pipe(*args, "-o", "json")
    assert json.loads(js)["summary"][0]["placed"] == doc["summary"][0]["placed"]
    code, out, _ = run_pipe(*args, "-o", "name")
    assert code == 0 and out.splitlines() == ["run/whole-gpu", "run/shared"]


# ---- labkit cluster status: the running clusters (their run states, as `cluster up` records them) ----

@pytest.fixture
def run_dir(tmp_path):
    """A run dir with one local cluster recorded as running (its server: this process, alive)."""
    root = tmp_path / "a-run-dir-with-a-rather-long-name-so-the-path-wraps"
    kubeconfig = root / "local-tiny" / "kubeconfig"
    state = {"backend": "local", "profile": "tiny", "pid": os.getpid(), "server": "https://127.0.0.1:41234",
             "kubeconfig": str(kubeconfig), "kubernetesVersion": "v1.37.0", "componentGroups": [],
             "runDir": str(kubeconfig.parent), "stateDir": str(tmp_path / "lk-state"),
             "process": identify(os.getpid()).to_json()}
    kubeconfig.parent.mkdir(parents=True)
    (kubeconfig.parent / "state.json").write_text(json.dumps(state))
    return root, state


def test_cluster_status_lists_running_clusters_as_a_table_or_a_document(run_dir):
    root, state = run_dir
    env = {"LABKIT_RUN_DIR": str(root)}
    code, out, err = run_tty("cluster", "status", NO_COLOR="1", **env)
    assert code == 0, err
    _fits(out)
    header, row, *under = out.splitlines()
    assert header.split() == ["BACKEND", "PROFILE", "CLUSTER"]
    assert row.split() == ["local", "tiny", "pid", str(os.getpid())]
    # under its row, ready to export: the path whole (on as many lines as it needs), never cut
    assert all(line.startswith("    ") for line in under) and len(under) > 1
    assert "".join(line.strip() for line in under) == f"KUBECONFIG={state['kubeconfig']}"
    code, out, _ = run_pipe("cluster", "status", **env)  # a pipe: the document
    expected = {"clusters": [{"backend": "local", "profile": "tiny", "cluster": None, "pid": os.getpid(),
                              "server": state["server"], "kubernetesVersion": "v1.37.0",
                              "kubeconfig": state["kubeconfig"]}]}
    assert code == 0 and json.loads(out) == expected
    code, out, _ = run_pipe("cluster", "status", "-o", "yaml", **env)
    assert code == 0 and yaml.safe_load(out) == expected
    code, out, _ = run_pipe("cluster", "status", "-o", "name", **env)
    assert code == 0 and out == "local/tiny\n"
    code, out, _ = run_pipe("cluster", "status", "-o", "wide", **env)
    assert out.splitlines()[1].split() == ["local", "tiny", "pid", str(os.getpid()), state["server"], "v1.37.0",
                                           state["kubeconfig"]]
    # one backend and profile: that cluster, or exit 3 and an empty list
    code, out, _ = run_pipe("cluster", "status", "--backend", "local", "--profile", "tiny", **env)
    assert code == 0 and json.loads(out) == expected
    code, out, err = run_pipe("cluster", "status", "--backend", "local", "--profile", "workshop", **env)
    assert code == 3 and json.loads(out) == {"clusters": []} and "not running" in err


def test_cluster_status_with_nothing_running(tmp_path):
    env = {"LABKIT_RUN_DIR": str(tmp_path)}
    code, out, _ = run_tty("cluster", "status", **env)
    assert code == 3 and out.startswith("no local or kind cluster is running")
    code, out, err = run_pipe("cluster", "status", **env)
    assert code == 3 and json.loads(out) == {"clusters": []} and "no local or kind cluster" in err
    code, _, err = run_pipe("cluster", "status", "--backend", "sim", "-o", "json", **env)
    assert code == 2 and len(err.splitlines()) == 1
