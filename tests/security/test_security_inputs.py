"""Inputs from anywhere are read within bounds, and YAML and numbers as the API server reads them (issue #41,
points 4 and 5): through the commands as a user types them, and through the Python API.

- A device, a FIFO or an endless stream given as ``-f`` stops at MAX_INPUT_BYTES or is refused at once,
  one line naming it; the commands run here under a memory cap, so a reader that reads on until the memory
  runs out fails (it would take the machine with it otherwise).
- ``-f -`` with an empty standard input is "no objects", never the manifests of the working folder.
- ``-f``/``--state`` arguments are paths whatever their name holds.
- Aliases are bounded as go-yaml bounds them (by ratio, not by size), in every loader; an integer past int64
  in an int64 field is refused naming the field; 1e999 stays a string; a huge quantity exponent is answered.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from fake_gpus.kubeyaml import MAX_INPUT_BYTES
from labkit.api import LoadError, QuantityError, dump, load, parse_quantity
from labkit.api.load import read_documents
from labkit.cel.validation import validate
from labkit.cluster import connect
from labkit.cluster.snapshot import cluster_state
from labkit.model.state import load_state
from tests.cliserver import CliServer
from tests.paths import REPO
from tests.security.test_security_cel import python_calls

ROOT = REPO
LABKIT = str(Path(sys.executable).parent / "labkit")
ENV = {**os.environ, "LABKIT_DEBUG": "", "PYTHONDONTWRITEBYTECODE": "1",
       "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # no per-core buffers under MEMORY_CAP
SLICES = ROOT / "tests/data/api/slices.yaml"
POD_ON_A_GPU = ROOT / "tests/data/scenarios/gpu-40gi.yaml"  # a claim template and pod train-a
#: what a command may take of the address space here: far above what it needs (a few hundred MiB with a
#: 64 MiB input), far below what reading /dev/zero to the end takes
MEMORY_CAP = 2 * 2**30
LIMIT_MIB = MAX_INPUT_BYTES // 2**20


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_capped(*args: str, cwd: Path = ROOT, stdin: int | object = subprocess.DEVNULL,
               program: str = "labkit") -> tuple[int, str, str]:
    """`labkit ARGS` (or `python -m fake_gpus ARGS`) as typed, under MEMORY_CAP."""
    argv = [sys.executable, "-m", "fake_gpus", *args] if program == "fake_gpus" else [LABKIT, *args]
    proc = subprocess.run(argv, cwd=cwd, env=ENV, stdin=stdin, capture_output=True, text=True, errors="replace",
                          preexec_fn=_cap_memory, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def cli() -> Iterator[CliServer]:
    server = CliServer(ENV)
    yield server
    server.close()


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- devices, FIFOs and endless streams ------------------------------------------------------------

@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("command", [["validate"], ["simulate", "--profile", "tiny"]])
def test_a_device_given_as_f_is_refused_with_its_path(device: str, command: list[str]) -> None:
    rc, _, err = run_capped(*command, "-f", device)
    assert rc == 2
    assert one_line(err) == (f"labkit {command[0]}: {device}: is a character device (like /dev/zero or a terminal), "
                             "not a file; give a file (or '-' to read standard input)")


def test_an_endless_standard_input_stops_at_the_limit() -> None:
    with open("/dev/zero", "rb") as zeros:
        rc, _, err = run_capped("validate", "-f", "-", stdin=zeros)
    assert rc == 2
    assert one_line(err) == (f"labkit validate: <stdin>: larger than {LIMIT_MIB} MiB, the most labkit reads of one "
                             "input (the API server takes 3 MiB per request); fix: split it into several files")


def _write_fifo(fifo: Path, chunks: Iterable[bytes]) -> threading.Thread:
    """A writer for ``fifo`` that is there before the command opens it (an O_RDWR holder, which never reads),
    writing ``chunks`` of at least 1 MiB: the first write returns only once the command has read most of it
    (a pipe buffers 64 KiB), and then the holder goes, so the command sees the end of the data when the
    writer closes, and the writer a broken pipe when the command stops reading."""
    holder = os.open(fifo, os.O_RDWR)

    def write() -> None:
        try:
            with open(fifo, "wb") as fh:
                for i, chunk in enumerate(chunks):
                    fh.write(chunk)
                    fh.flush()
                    if i == 0:
                        os.close(holder)
        except BrokenPipeError:  # the command stopped reading: what an endless writer is told
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_fifo_is_read_while_written_and_bounded(tmp_path: Path) -> None:
    fifo = tmp_path / "manifests.yaml"
    os.mkfifo(fifo)
    # a writer that writes a manifest (and a comment of 1 MiB) and closes: read as a file is
    writer = _write_fifo(fifo, [SLICES.read_bytes() + b"\n# " + b"x" * 2**20 + b"\n"])
    rc, _, err = run_capped("validate", "-f", str(fifo))
    assert (rc, one_line(err)) == (0, "1 object valid")
    writer.join()  # (after the asserts: a command that never read would leave the writer waiting)
    # a writer that writes past the limit: the reading stops there, the writer gets a broken pipe
    writer = _write_fifo(fifo, (b"# comment\n" * (2**20 // 10) for _ in range(LIMIT_MIB + 32)))
    rc, _, err = run_capped("validate", "-f", str(fifo))
    assert rc == 2
    assert one_line(err).startswith(f"labkit validate: {fifo}: larger than {LIMIT_MIB} MiB, the most labkit reads")
    writer.join()


def test_a_fifo_nobody_writes_is_refused_at_once(tmp_path: Path, cli: CliServer) -> None:
    """kubectl would wait for a writer for ever (k8s.io/cli-runtime pkg/resource/visitor.go: FileVisitor
    os.Open()s the file); labkit opens a FIFO without waiting and refuses it when no program has it open
    for writing."""
    fifo = tmp_path / "nobody.yaml"
    os.mkfifo(fifo)
    rc, _, err = cli.run("labkit", ["validate", "-f", str(fifo)])
    assert rc == 2
    assert one_line(err) == (f"labkit validate: {fifo}: is a FIFO no program writes to (nothing arrived); fix: "
                             "start the program that writes it first, or pipe its output to '-f -'")
    with pytest.raises(LoadError, match="is a FIFO no program writes to"):
        read_documents(fifo)


# -- `-f -` and file names -------------------------------------------------------------------------

def test_dash_with_an_empty_standard_input_is_no_objects_not_the_working_folder(tmp_path: Path,
                                                                                 cli: CliServer) -> None:
    (tmp_path / "manifests.yaml").write_bytes(POD_ON_A_GPU.read_bytes())  # what must not be read
    # the CLI server's commands have /dev/null as standard input
    rc, out, err = cli.run("labkit", ["simulate", "--profile", "tiny", "-f", "-", "-o", "json"], cwd=tmp_path)
    assert (rc, out) == (2, "")
    assert one_line(err) == ("labkit simulate: -: no objects (the input is empty or only comments); fix: give "
                             "manifests with apiVersion, kind and metadata")
    rc, out, err = cli.run("labkit", ["validate", "--skip-non-kubernetes", "-f", "-"], cwd=tmp_path)
    assert (rc, out, one_line(err)) == (0, "", "no Kubernetes objects in 1 file(s): nothing to validate")
    rc, _, err = cli.run("labkit", ["describe", "pod", "train-a", "-f", "-"], cwd=tmp_path)
    assert (rc, one_line(err)) == (2, "labkit describe: -: no objects (the input is empty or only comments); fix: "
                                      "give manifests with apiVersion, kind and metadata")


def test_python_api_empty_text_is_no_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "manifests.yaml").write_bytes(POD_ON_A_GPU.read_bytes())
    monkeypatch.chdir(tmp_path)
    assert load("") == []
    assert load(" \n") == []


#: file names that look like YAML or JSON text (load("a: b") reads the text): as arguments they are paths
ODD_NAMES = ["a: b.yaml", "{x}.yaml", "[1].yaml", "line\nbreak.yaml", "end:"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_f_is_a_path_whatever_its_name_holds(name: str, tmp_path: Path, cli: CliServer) -> None:
    (tmp_path / name).write_bytes(POD_ON_A_GPU.read_bytes())
    rc, out, err = cli.run("labkit", ["simulate", "--profile", "tiny", "-f", name, "-o", "name"], cwd=tmp_path)
    assert (rc, out, err) == (0, "pod/train-a\nresourceclaim.resource.k8s.io/train-a-gpu-rnz2j\n", "")


@pytest.fixture(scope="module")
def dump_text() -> str:
    """A dump as `labkit snapshot` writes it: the tiny sim with pod train-a on a GPU."""
    cluster = connect("sim", "tiny", progress=False)
    cluster.apply(POD_ON_A_GPU)
    cluster.wait()
    return dump(cluster_state(cluster), "yaml")


@pytest.mark.parametrize("name", ODD_NAMES)
def test_state_is_a_path_whatever_its_name_holds(name: str, tmp_path: Path, dump_text: str, cli: CliServer) -> None:
    (tmp_path / name).write_text(dump_text)
    rc, out, err = cli.run("labkit", ["describe", "pod", "train-a", "--state", name], cwd=tmp_path)
    assert rc == 0, err
    assert "Name:" in out and "train-a" in out and "Running" in out
    objs = load_state(tmp_path / name)  # the Python API: a Path is a file too
    assert any(o["kind"] == "Pod" and o["metadata"]["name"] == "train-a" for o in objs)


# -- aliases, as go-yaml bounds them ---------------------------------------------------------------
# go-yaml v2 decode.go (go.yaml.in/yaml/v2, which sigs.k8s.io/yaml reads YAML with; v3 the same):
# decoder.unmarshal counts every node decoded and those decoded inside an alias, and fails with
# "document contains excessive aliasing" past 1,000 decodes and 100 alias decodes when the alias share
# exceeds allowedAliasRatio (99% up to 400,000 decodes, down to 10% at 4,000,000). Checked against
# sigs.k8s.io/yaml v1.6.0 (yaml.Unmarshal) on the documents below.

def _laughs(levels: int) -> str:
    """A billion laughs of ``levels`` levels of ten: 10**levels values from a few hundred bytes."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


#: a million values once expanded: refused by go-yaml's ratio (a size bound of millions would not)
LAUGHS = _laughs(6)
ALIASING = ("document contains excessive aliasing (go-yaml, which kubectl and the API server read YAML with, "
            "refuses it); fix: write the repeated parts out or use fewer aliases")


@pytest.mark.parametrize(("command", "line"), [
    (["labkit", "validate", "-f", "laughs.yaml"], f"labkit validate: laughs.yaml:doc 1: {ALIASING}"),
    (["labkit", "simulate", "--state", "laughs.yaml", "-f", str(SLICES)], f"labkit simulate: laughs.yaml:doc 1: {ALIASING}"),
    (["labkit", "topology", "--profile", "laughs.yaml"], f"labkit topology: laughs.yaml:doc 1: {ALIASING}"),
    (["fake_gpus", "slices", "--profile", "laughs.yaml", "--node", "n1"],
     f"fake_gpus slices: node profile {{dir}}/laughs.yaml: {ALIASING}"),
], ids=["manifest", "state-dump", "cluster-profile", "node-profile"])
def test_a_billion_laughs_is_refused_in_every_loader(command: list[str], line: str, tmp_path: Path,
                                                     cli: CliServer) -> None:
    (tmp_path / "laughs.yaml").write_text(LAUGHS)
    rc, out, err = cli.run(command[0], command[1:], cwd=tmp_path)
    assert (rc, out) == (2, "")
    assert one_line(err) == line.format(dir=tmp_path)


def _references(count: int) -> str:
    """An anchor of ten values and ``count`` aliases of it."""
    return "base: &b {" + ", ".join(f"k{i}: v" for i in range(10)) + "}\nrefs: [" + ", ".join(["*b"] * count) + "]\n"


def test_aliases_are_counted_as_go_yaml_counts_them() -> None:
    """go-yaml takes 24,707 aliases of a ten-value mapping and refuses 24,708 (its ratio passes 99%):
    so does labkit; the refused document is 272k values, which a bound on size alone lets through."""
    (doc,) = load(_references(24_707), default_namespace=None)
    assert len(doc["refs"]) == 24_707 and doc["refs"][0] == doc["refs"][-1] == {f"k{i}": "v" for i in range(10)}
    doc["refs"][0]["k0"] = "changed"  # the copies are independent (JSON has no sharing)
    assert doc["refs"][1]["k0"] == "v" and doc["base"]["k0"] == "v"
    with pytest.raises(LoadError, match=r"^<string>:doc 1: document contains excessive aliasing"):
        load(_references(24_708))
    with pytest.raises(LoadError, match="excessive aliasing"):
        load(LAUGHS)


# -- numbers as the API server reads them ----------------------------------------------------------

CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: c
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: gpu.nvidia.com
        allocationMode: ExactCount
        count: {count}
"""


def test_an_integer_past_int64_is_refused_naming_the_field(tmp_path: Path, cli: CliServer) -> None:
    """sigs.k8s.io/yaml reads 9223372036854775808 as a uint64, which the API server cannot decode into the
    int64 count ("json: cannot unmarshal number 9223372036854775808 into Go struct field
    ExactDeviceRequest.spec.devices.requests.exactly.count of type int64", k8s.io/api resource/v1)."""
    (tmp_path / "claim.yaml").write_text(CLAIM.format(count=2**63))
    rc, out, err = cli.run("labkit", ["validate", "-f", "claim.yaml"], cwd=tmp_path)
    assert (rc, err) == (1, "")
    assert out == ("ResourceClaim/c: spec.devices.requests[0].exactly.count: must be a 64-bit integer, "
                   "-9223372036854775808 to 9223372036854775807 (the API server cannot decode a larger one), "
                   "not 9223372036854775808\n")
    (tmp_path / "claim.yaml").write_text(CLAIM.format(count=2**63 - 1))
    rc, _, err = cli.run("labkit", ["validate", "-f", "claim.yaml"], cwd=tmp_path)
    assert (rc, err) == (0, "1 object valid\n")
    # the Python API says the same
    (problem,) = validate(load(CLAIM.format(count=2**63)))
    assert problem.path == "spec.devices.requests[0].exactly.count" and "64-bit integer" in problem.message


SLICE = """apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: s
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {{name: p, generation: 1, resourceSliceCount: 1}}
  devices:
  - name: d0
    attributes:
      label: {{string: {label}}}
    capacity:
      memory: {{value: {memory}}}
"""


def test_a_float_past_float64_stays_a_string(tmp_path: Path, cli: CliServer) -> None:
    """go-yaml v2 resolve.go: a plain scalar whose strconv.ParseFloat fails (1e999: out of range) is a
    string, not infinity; sigs.k8s.io/yaml gives {"label": {"string": "1e999"}}, which the API server stores,
    and a quantity "1e999" (ParseQuantity keeps it: "1e999")."""
    (tmp_path / "slice.yaml").write_text(SLICE.format(label="1e999", memory="1e999"))
    rc, out, err = cli.run("labkit", ["validate", "-f", "slice.yaml"], cwd=tmp_path)
    assert (rc, out, err) == (0, "", "1 object valid\n")
    (obj,) = load(SLICE.format(label=".5e999", memory="1e999"))
    device = obj["spec"]["devices"][0]
    assert device["attributes"]["label"] == {"string": ".5e999"} and device["capacity"]["memory"]["value"] == "1e999"
    assert parse_quantity("1e999").canonical() == "1e999"
    # in JSON a number past float64 is refused (k8s.io/apimachinery/pkg/util/json: ParseFloat's range error)
    with pytest.raises(LoadError, match=r"^<string>:doc 1: number 1e999 is out of range of a 64-bit float"):
        load('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": 1e999}}')


def test_a_huge_quantity_exponent_is_answered(tmp_path: Path, cli: CliServer) -> None:
    """1e999999999 was computed as 10**999999999 (hours). k8s.io/apimachinery resource.ParseQuantity refuses
    an exponent past int32 ("unable to parse quantity's suffix", suffix.go after kubernetes/kubernetes#141203),
    rounds what is below 1n up to 1n and caps a BinarySI value at 2^63-1 (quantity.go); labkit also refuses
    a value of more than 1,000 digits, which it would have to build exactly."""
    (tmp_path / "slice.yaml").write_text(SLICE.format(label="x", memory="1e999999999"))
    rc, out, err = cli.run("labkit", ["validate", "-f", "slice.yaml"], cwd=tmp_path)
    assert (rc, err) == (1, "")
    assert out == ('ResourceSlice/s: spec.devices[0].capacity[memory].value: Invalid value: "1e999999999": quantity '
                   "'1e999999999': more than 1,000 digits, past what labkit computes (Kubernetes documents quantities "
                   "up to 2^63-1, about 9.2e18); fix: give a smaller value, with a suffix (Ki..Ei, k..E)\n")
    with pytest.raises(QuantityError, match="more than 1,000 digits"):
        parse_quantity("1e999999999")
    with pytest.raises(QuantityError, match="unable to parse quantity's suffix"):
        parse_quantity("1e2147483648")
    with pytest.raises(QuantityError, match="more than 1,000 digits"):
        parse_quantity("1" * 5000)
    assert parse_quantity("1e-999999999").canonical() == "1e-9"  # Go: 1e-20 -> 1e-9, rounded up
    assert parse_quantity("-1e-20").canonical() == "-1e-9"
    assert parse_quantity("16Ei").canonical() == "9223372036854775807"  # Go caps BinarySI at 2^63-1
    assert parse_quantity("0e999999999").canonical() == "0"


def test_a_huge_value_in_a_refusal_costs_what_is_shown() -> None:
    """A refused string value is shown as the API server shows it (Go's %q, cut at 60 characters with
    "..."), and only those characters are quoted: a 600,000-character label value is not escaped whole
    (1,800,000 calls each, most of a fuzzed manifest's CPU) to print 56 of them."""
    huge = "y" * 600_000  # twice: within etcd's 1.5 MiB per object
    # Go's %q (src/strconv/quote.go): \a for BEL, printable characters as they are
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
           "metadata": {"name": "huge", "labels": {"a": huge, "b": "\x07" + huge}}, "spec": {}}
    validate([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "warm-up"}}])
    problems: list[str] = []
    calls = python_calls(lambda: problems.extend(map(str, validate([obj]))))
    assert [p.split(": must be")[0] for p in problems] == [
        f'DeviceClass/huge: metadata.labels[a]: Invalid value: "{"y" * 56}...',
        f'DeviceClass/huge: metadata.labels[b]: Invalid value: "\\a{"y" * 54}...']
    assert calls < 20_000, calls
