"""Safe on a terminal (#41): text from a cluster, a dump or a manifest never reaches a terminal raw.

kubectl escapes what it prints for people since CVE-2021-25743: ESC as ``^[`` and CR as ``\\r``
(kubernetes/kubernetes staging/src/k8s.io/cli-runtime/pkg/printers/terminal.go, EscapeTerminal),
in every table cell (.../cli-runtime/pkg/printers/tableprinter.go, appendCellValue) and in all of
``kubectl describe`` (staging/src/k8s.io/kubectl/pkg/describe/describe.go, prefixWriter writes
through printers.WriteEscaped); ``-o json|yaml`` are exact. The kit escapes those two as kubectl
does and the other C0 controls, DEL, C1 (U+009B is a CSI) and the bidi controls too, in Go's %q form
(labkit.output.escape_terminal); its own colour stays.

Each command runs as typed, on a pseudo-terminal and through a pipe; a hostile string holds an SGR
(ESC [31m), an OSC title (ESC ]0;title BEL), a backspace, a C1 CSI, a right-to-left override and a CR.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from labkit.cluster import connect
from labkit.cluster.explain_live import explain_pod, explain_pod_doc
from tests import builders as b
from tests.cli.test_cli_terminal import BIN, ROOT, _env, _flat, run_pipe, run_tty

HOSTILE = "\x1b[31mred\x1b]0;title\x07\x08\x9b\u202eevil\rover"
#: how a person sees it: kubectl's ^[ for ESC, Go's %q form for the rest
SHOWN = "^[[31mred^[]0;title\\a\\b\\u009b\\u202eevil"
#: in prose (describe, explain, error lines) the CR shows too; a table cell is one line of words
SHOWN_CR = SHOWN + "\\rover"
#: what no human output may hold raw: C0 but tab and newline, DEL, C1, the bidi controls
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _cel_string(text: str) -> str:
    """``text`` as a CEL string literal that is plain ASCII (the selector's source holds no control
    character; the string it builds does)."""
    return '"' + "".join(c if " " <= c <= "~" and c not in '"\\' else f"\\u{ord(c):04x}" for c in text) + '"'


def _no_raw(text: str) -> None:
    assert not RAW.findall(text), f"raw control characters reach the terminal: {RAW.findall(text)} in {text!r}"


def _write(path: Path, docs: list[dict]) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def _claim_and_pod(selector: str) -> list[dict]:
    return [b.claim("hostile", selectors=[selector]), b.pod("hostile", claims="hostile", command=None)]


#: a selector whose CEL error quotes the hostile string raw: kube-scheduler's condition and event say it
REGEX_SELECTOR = f"device.driver.matches(device.driver + {_cel_string(HOSTILE + '(')})"


@pytest.fixture(scope="module")
def pending(tmp_path_factory) -> str:
    return _write(tmp_path_factory.mktemp("hostile") / "pod.yaml", _claim_and_pod(REGEX_SELECTOR))


def test_simulate_table_escapes_the_schedulers_message_json_and_yaml_keep_it(pending):
    code, out, err = run_pipe("simulate", "-f", pending, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    (pod,) = doc["pods"]
    assert f"`gpu.nvidia.com{HOSTILE}(`" in pod["events"][-1]["message"]  # the data, exact
    code, out, _ = run_pipe("simulate", "-f", pending, "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == doc
    for code, out, err in (run_tty("simulate", "-f", pending, NO_COLOR="1"),
                           run_pipe("simulate", "-f", pending, "-o", "table"),
                           run_pipe("simulate", "-f", pending, "-o", "wide")):
        assert code == 0, err
        _no_raw(out + err)
        assert out.count(f"gpu.nvidia.com{SHOWN}") == 2, out  # the pod's row, and its claim's
    # the kit's own colour still reaches the terminal; only the data is escaped
    code, out, _ = run_tty("simulate", "-f", pending)
    assert code == 0
    assert "\x1b[33mPending\x1b[0m" in out and "\x1b[1mNAME\x1b[0m" in out
    assert f"gpu.nvidia.com{SHOWN}" in out and "\x1b[31mred" not in out and "\x1b]" not in out
    _no_raw(re.sub(r"\x1b\[[0-9;]*m", "", out))


def test_describe_escapes_conditions_explanation_and_events(pending):
    for code, out, err in (run_tty("describe", "pod", "hostile", "-f", pending, NO_COLOR="1"),
                           run_pipe("describe", "pod", "hostile", "-f", pending)):
        assert code == 0, err
        _no_raw(out + err)
        conditions = out.split("Conditions:\n", 1)[1].split("\nResource Claims:", 1)[0]
        explanation = out.split("Explanation:\n", 1)[1].split("\nEvents:", 1)[0]
        events = out.split("\nEvents:\n", 1)[1]
        assert SHOWN in _flat(conditions) and SHOWN in _flat(events)
        assert SHOWN_CR in _flat(explanation)  # prose: the CR is shown, as kubectl describe shows it


def test_explain_escapes_what_kube_scheduler_said_its_data_form_is_exact(pending):
    """`labkit explain pod` prints explain_pod's text (the cluster here: a sim standing in for a real
    one: the same get/list/events); -o json|yaml print explain_pod_doc."""
    cluster = connect("sim", "workshop", progress=False)
    cluster.apply(Path(pending))
    cluster.wait()
    text = explain_pod(cluster, "hostile")
    _no_raw(text)
    said = [line for line in text.splitlines() if line.startswith(("  kube-scheduler says:", "  event Warning"))]
    assert len(said) == 2 and all(SHOWN_CR in line for line in said), text
    doc = explain_pod_doc(cluster, "hostile")
    assert f"gpu.nvidia.com{HOSTILE}(" in doc["scheduler"]["condition"]["message"]
    assert all(f"gpu.nvidia.com{HOSTILE}(" in e["message"] for e in doc["scheduler"]["events"])


def _slice_with(value: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s1"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                     "pool": {"name": "p1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "d0", "attributes": {"model": {"string": value}}}]}}


#: the attribute's value as a regular expression that does not compile: the CEL error quotes it raw
MODEL = 'device.attributes["gpu.example.com"].model'
MATCHES_ITSELF = f'{MODEL}.matches({MODEL} + "(")'


def test_cel_table_escapes_an_attribute_value_json_keeps_it(tmp_path):
    slices = _write(tmp_path / "slice.yaml", [_slice_with(HOSTILE)])
    code, out, _ = run_pipe("cel", MATCHES_ITSELF, "-f", slices, "-o", "json")
    (row,) = json.loads(out)["devices"]
    assert code == 2 and row["result"] == "error" and f"`{HOSTILE}(`" in row["message"]
    for code, out, err in (run_tty("cel", MATCHES_ITSELF, "-f", slices, NO_COLOR="1"),
                           run_pipe("cel", MATCHES_ITSELF, "-f", slices)):
        assert code == 2
        _no_raw(out + err)
        assert SHOWN in "".join(out.split())  # the MESSAGE cell (wrapped to the terminal: a long word is cut)
        # the error line quotes the first device's message: escaped, one line
        assert len(err.splitlines()) == 1 and err.startswith("labkit cel: ") and SHOWN in err
    code, out, _ = run_tty("cel", MATCHES_ITSELF, "-f", slices)  # colour: the RESULT column's, kept
    assert "\x1b[31merror\x1b[0m" in out and SHOWN in "".join(out.split()) and "\x1b[31mred" not in out
    _no_raw(re.sub(r"\x1b\[[0-9;]*m", "", out))


def test_allocate_explanation_escapes_the_value_json_keeps_it(tmp_path):
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
    claim = _claim_and_pod(MATCHES_ITSELF)[0]
    claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu.example.com"
    files = _write(tmp_path / "alloc.yaml", [cls, _slice_with(HOSTILE), claim])
    code, out, _ = run_pipe("allocate", "-f", files, "--node", "n1", "--explain", "-o", "json")
    assert f"`{HOSTILE}(`" in json.loads(out)["explanation"]["error"]
    code, out, err = run_tty("allocate", "-f", files, "--node", "n1", "--explain", NO_COLOR="1")
    _no_raw(out + err)
    assert SHOWN_CR in _flat(out.split("\nnode n1:", 1)[1])  # the explanation
    assert SHOWN_CR in err and len(err.splitlines()) == 1


def test_validate_lines_escape_what_they_quote(tmp_path):
    """A label key of control characters with a value that is no string: the problem's field path
    quotes the key; every problem stays one line on stdout."""
    obj = _slice_with("x")
    obj["metadata"]["labels"] = {HOSTILE: 1}
    files = _write(tmp_path / "slice.yaml", [obj])
    for code, out, err in (run_tty("validate", "-f", files), run_pipe("validate", "-f", files)):
        assert code == 1
        _no_raw(out + err)
        lines = out.splitlines()
        assert lines and all(line.startswith("ResourceSlice/s1: ") for line in lines), lines
        assert any(f"metadata.labels[{SHOWN_CR}]" in line for line in lines), lines


def test_an_error_line_naming_a_hostile_file_is_one_escaped_line(tmp_path):
    missing = tmp_path / (HOSTILE + ".yaml")
    bad = tmp_path / (HOSTILE + "-bad.yaml")
    bad.write_text("a: [")
    # a newline in the name: the line names the file up to it, then says it has more, still one line
    forged = tmp_path / (HOSTILE + "\nlabkit validate: 3 objects valid.yaml")
    shown = f"{tmp_path}/{SHOWN_CR}"
    for args, exit_code, line in ((["validate", "-f", str(missing)], 2, f"labkit validate: {shown}.yaml: no such file"),
                                  (["simulate", "-f", str(missing)], 3, f"labkit simulate: {shown}.yaml: no such file"),
                                  (["validate", "-f", str(bad)], 2, f"labkit validate: {shown}-bad.yaml:doc 1: "),
                                  (["validate", "-f", str(forged)], 2, f"labkit validate: {shown} (and 1 more)")):
        for code, out, err in (run_tty(*args), run_pipe(*args)):
            assert code == exit_code and out == ""
            _no_raw(err)
            assert len(err.splitlines()) == 1 and err.startswith(line), err
    # kubectl dra prints labkit's lines
    p = subprocess.run([str(BIN / "kubectl-dra"), "validate", "-f", str(missing)], capture_output=True, text=True,
                       cwd=ROOT, env=_env(), stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and p.stdout == "" and p.stderr == f"labkit validate: {shown}.yaml: no such file\n"
