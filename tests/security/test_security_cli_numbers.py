"""Command-line numbers (issue #41, point 7): NaN, the infinities and absurd values are refused by
the option's argparse type, naming it, before any work: argparse's own error (the usage, then
``PROG: error: argument OPTION: ...``), exit 2, nothing on stdout, no file written.

Every numeric option of every command is in TABLE with the values it refuses. Go commands do the
same with their flags (spf13/pflag: a value that does not parse is `invalid argument "x" for "--flag"`,
reported before the command runs; pflag/flag.go, `failf`), and the kit's own bounds are said in
each option's --help (checked at the end). labkit's types live in labkit/cli_types.py; fake_gpus,
which imports nothing from labkit, has fake_gpus.cli.number.
"""

from __future__ import annotations

import re

import pytest

from labkit.experiments.sweep import SweepError, parse_seeds
from tests.cliserver import CliServer
from tests.paths import REPO

ROOT = REPO
#: what `--plot` would write if the command ran (it must not)
PLOT = "refused-number-plot.png"

RUN = ["experiment", "run", "--plot", PLOT]
SWEEP = ["experiment", "sweep", "--no-progress"]
INFLATION = ["experiment", "inflation", "--no-sim", "--plot", PLOT]
SIMULATE = ["simulate", "--profile", "tiny", "-f", "tests/data/api/slices.yaml"]
DESCRIBE = ["describe", "pod", "x", "-f", "tests/data/api/slices.yaml"]
CD_CONTROLLER = ["compute-domain-controller"]

#: (program, the command before the option, its prog in argparse's message, option, value, what the message says)
TABLE: list[tuple[str, list[str], str, str, str, str]] = [
    # labkit experiment sweep: the grid's axes and sizes
    ("labkit", SWEEP, "labkit experiment sweep", "--seeds", "0-999999999999", "out of range [0, 4294967295]"),
    ("labkit", SWEEP, "labkit experiment sweep", "--seeds", "0-10000", "more than 10000 seeds in all"),
    ("labkit", SWEEP, "labkit experiment sweep", "--seeds", "5-1", "'5-1' runs backwards"),
    ("labkit", SWEEP, "labkit experiment sweep", "--seeds", "nan", "'nan' is not a seed"),
    ("labkit", SWEEP, "labkit experiment sweep", "--seeds", "4294967296", "out of range [0, 4294967295]"),
    ("labkit", SWEEP, "labkit experiment sweep", "--seeds", "1e3", "'1e3' is not a seed"),
    ("labkit", SWEEP, "labkit experiment sweep", "--workers", "100000", "'100000' is out of range [1, "),
    ("labkit", SWEEP, "labkit experiment sweep", "--workers", "0", "'0' is out of range [1, "),
    ("labkit", SWEEP, "labkit experiment sweep", "--workers", "nan", "'nan' is not a whole number"),
    ("labkit", SWEEP, "labkit experiment sweep", "--pods", "1000000000", "'1000000000' is out of range [0, 100000]"),
    ("labkit", SWEEP, "labkit experiment sweep", "--pods", "-5", "'-5' is out of range [0, 100000]"),
    ("labkit", SWEEP, "labkit experiment sweep", "--limit", "-1", "'-1' is out of range [0, 100000]"),
    ("labkit", SWEEP, "labkit experiment sweep", "--rate", "nan", "'nan' is not a finite number"),
    ("labkit", SWEEP, "labkit experiment sweep", "--rate", "inf", "'inf' is not a finite number"),
    ("labkit", SWEEP, "labkit experiment sweep", "--tick", "-inf", "'-inf' is not a finite number"),
    ("labkit", SWEEP, "labkit experiment sweep", "--tick", "0", "'0' is out of range [0.001, 86400]"),
    ("labkit", SWEEP, "labkit experiment sweep", "--traces", "synthetic:1000000000",
     "trace 'synthetic:1000000000': 1000000000 pods; give 1 to 100000"),
    ("labkit", SWEEP, "labkit experiment sweep", "--fleets", "exp-small,alibaba-shape:nan",
     "fleet 'alibaba-shape:nan': alibaba-shape fleet scale nan: give a number in (0, 10]"),
    # labkit experiment run
    ("labkit", RUN, "labkit experiment run", "--seed", "-1", "'-1' is out of range [0, 4294967295]"),
    ("labkit", RUN, "labkit experiment run", "--seed", "1e9", "'1e9' is not a whole number"),
    ("labkit", RUN, "labkit experiment run", "--pods", "-5", "'-5' is out of range [0, 100000]"),
    ("labkit", RUN, "labkit experiment run", "--pods", "1" + "0" * 40, "is out of range [0, 100000]"),
    ("labkit", RUN, "labkit experiment run", "--limit", "1e9", "'1e9' is not a whole number; give one in [0, 100000]"),
    ("labkit", RUN, "labkit experiment run", "--rate", "nan", "'nan' is not a finite number; give one in [0.001, 100000]"),
    ("labkit", RUN, "labkit experiment run", "--rate", "0", "'0' is out of range [0.001, 100000]"),
    ("labkit", RUN, "labkit experiment run", "--tick", "inf", "'inf' is not a finite number; give one in [0.001, 86400]"),
    ("labkit", RUN, "labkit experiment run", "--tick", "1e-9", "'1e-9' is out of range [0.001, 86400]"),
    ("labkit", RUN, "labkit experiment run", "--trace", "synthetic:0", "trace 'synthetic:0': 0 pods; give 1 to 100000"),
    ("labkit", RUN, "labkit experiment run", "--trace", "alibaba-shape:1e9", "'1e9' is not a whole number of pods"),
    ("labkit", RUN, "labkit experiment run", "--fleet", "alibaba-shape:inf", "give a number in (0, 10]"),
    # labkit experiment inflation
    ("labkit", INFLATION, "labkit experiment inflation", "--ratio", "nan", "'nan' is not a finite number; give one in [0.1, 10]"),
    ("labkit", INFLATION, "labkit experiment inflation", "--ratio", "inf", "'inf' is not a finite number"),
    ("labkit", INFLATION, "labkit experiment inflation", "--ratio", "1e9", "'1e9' is out of range [0.1, 10]"),
    ("labkit", INFLATION, "labkit experiment inflation", "--ratio", "0", "'0' is out of range [0.1, 10]"),
    ("labkit", INFLATION, "labkit experiment inflation", "--fleet", "openb:1e9", "give a whole number from 1 to 10000"),
    ("labkit", INFLATION, "labkit experiment inflation", "--fleet", "openb:0", "give a whole number from 1 to 10000"),
    ("labkit", INFLATION, "labkit experiment inflation", "--fleet", "openb:" + "9" * 5000, "give a whole number from 1"),
    ("labkit", INFLATION, "labkit experiment inflation", "--seeds", "0-999999999999", "out of range [0, 4294967295]"),
    ("labkit", INFLATION, "labkit experiment inflation", "--workers", "100000", "'100000' is out of range [1, "),
    # labkit simulate / describe
    ("labkit", SIMULATE, "labkit simulate", "--advance", "nan", "'nan' is not a finite number; give one in [0, 31536000]"),
    ("labkit", SIMULATE, "labkit simulate", "--advance", "inf", "'inf' is not a finite number"),
    ("labkit", SIMULATE, "labkit simulate", "--advance", "-1", "'-1' is out of range [0, 31536000]"),
    ("labkit", SIMULATE, "labkit simulate", "--advance", "1e300", "'1e300' is out of range [0, 31536000]"),
    ("labkit", SIMULATE, "labkit simulate", "--seed", "-1", "'-1' is out of range [0, 4294967295]"),
    ("labkit", DESCRIBE, "labkit describe", "--advance", "nan", "'nan' is not a finite number"),
    ("labkit", DESCRIBE, "labkit describe", "--seed", "99999999999", "'99999999999' is out of range [0, 4294967295]"),
    # python -m fake_gpus
    ("fake_gpus", CD_CONTROLLER, "python -m fake_gpus compute-domain-controller", "--interval", "nan",
     "'nan' is not a finite number; give one in [0.05, 3600]"),
    ("fake_gpus", CD_CONTROLLER, "python -m fake_gpus compute-domain-controller", "--interval", "0",
     "'0' is out of range [0.05, 3600]"),
    ("fake_gpus", CD_CONTROLLER, "python -m fake_gpus compute-domain-controller", "--interval", "inf",
     "'inf' is not a finite number"),
]


@pytest.fixture(scope="module")
def server():
    srv = CliServer()
    yield srv
    srv.close()


@pytest.mark.parametrize(("program", "command", "prog", "option", "value", "says"), TABLE,
                         ids=[f"{p.split()[-1]}-{o}={v[:20]}" for _, _, p, o, v, _ in TABLE])
def test_a_bad_number_is_argparses_error_naming_the_option(server, tmp_path, program, command, prog, option, value,
                                                           says):
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the inputs, from a directory where --plot would write
    rc, out, err = server.run(program, [*command, f"{option}={value}"], cwd=tmp_path)
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert out == "", out  # no report, no rows
    assert err.startswith(f"usage: {prog} "), err  # argparse's own form: usage, then the error line
    assert lines[-1].startswith(f"{prog}: error: argument {option}: "), err
    assert says in lines[-1], err
    assert not (tmp_path / PLOT).exists()  # refused while parsing: nothing ran


def test_seeds_are_counted_before_a_range_is_expanded():
    """The Python API refuses a huge range at once (it was expanded, and each seed checked against
    the list so far: 10^12 seeds would never finish)."""
    with pytest.raises(SweepError, match=r"'0-999999999': more than 10000 seeds in all"):
        parse_seeds("0-999999999")
    assert parse_seeds("0-9999") == list(range(10_000))
    assert parse_seeds("3,0-2,2") == [3, 0, 1, 2]  # in the order given, each once


@pytest.mark.parametrize(("program", "command", "says"), [
    ("labkit", ["experiment", "sweep"], [r"--seeds SEEDS comma-separated seeds and ranges, e.g. 0-4,9 \(0 to "
                                         r"4294967295, at most 10000 in all", r"at most 4 per CPU",
                                         r"0 to 100000", r"0.001 to 100000", r"0.001 to 86400"]),
    ("labkit", ["experiment", "run"], [r"0 to 4294967295", r"PODS: 1 to 100000", r"SCALE in \(0, 10\]"]),
    ("labkit", ["experiment", "inflation"], [r"0.1 to 10", r"N: 1 to 10000", r"at most 10000"]),
    ("labkit", ["simulate"], [r"0 to 31536000 \(a year\)", r"0 to 4294967295"]),
    ("fake_gpus", ["compute-domain-controller"], [r"0.05 to 3600"]),
])
def test_help_says_each_bound(server, program, command, says):
    rc, out, _ = server.run(program, [*command, "--help"])
    assert rc == 0
    for pattern in says:  # argparse wraps the help: a space may be a line break
        assert re.search(pattern.replace(" ", r"\s+"), out), (pattern, out)
