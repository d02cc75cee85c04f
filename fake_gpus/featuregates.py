"""The feature gates of NVIDIA's GPU DRA driver (``--feature-gates Name=true,...``), as the fake
driver accepts them: the same names and defaults (NVIDIA's pkg/featuregates/featuregates.go), the
same ``key=bool`` syntax as Kubernetes components (component-base/featuregate), and the same
refusal of an unknown name. Of the behaviour behind them the fake driver models what its flags
touch: ``--consumable-shares`` other than ``disabled`` needs ConsumableShares on, as in NVIDIA's
driver. MIG and passthrough come from the node profile (the fake driver does not refuse a profile
with dynamic MIG when DynamicMIG is off).
"""

from __future__ import annotations

from fake_gpus.errors import InputError

#: NVIDIA's gates and their defaults (alpha off; IMEXDaemonsWithDNSNames, ComputeDomainCliques and
#: CrashOnNVLinkFabricErrors beta on)
DEFAULTS: dict[str, bool] = {
    "TimeSlicingSettings": False,
    "MPSSupport": False,
    "IMEXDaemonsWithDNSNames": True,
    "PassthroughSupport": False,
    "NVMLDeviceHealthCheck": False,
    "DynamicMIG": False,
    "ComputeDomainCliques": True,
    "CrashOnNVLinkFabricErrors": True,
    "DeviceMetadata": False,
    "FabricManagerPartitioning": False,
    "HostManagedIMEXDaemon": False,
    "DRAListTypeAttributes": False,
    "ConsumableShares": False,
}

_TRUE = {"1", "t", "T", "true", "TRUE", "True"}  # Go's strconv.ParseBool
_FALSE = {"0", "f", "F", "false", "FALSE", "False"}
CONSUMABLE_SHARES_MODES = ("disabled", "memory", "unlimited")


class FeatureGateError(InputError):
    """A bad --feature-gates or --consumable-shares value: one line, exit code 2."""


def parse(text: str) -> dict[str, bool]:
    """``"A=true,B=false"`` -> every gate's value (the defaults for the ones not named)."""
    gates = dict(DEFAULTS)
    for item in (s.strip() for s in (text or "").split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep:
            raise FeatureGateError(f"--feature-gates: missing bool value for {name}")
        if name not in DEFAULTS:
            raise FeatureGateError(f"--feature-gates: unrecognized feature gate: {name} "
                                   f"(known: {', '.join(sorted(DEFAULTS))})")
        if value not in _TRUE | _FALSE:
            raise FeatureGateError(f"--feature-gates: invalid value of {name}={value} (must be true or false)")
        gates[name] = value in _TRUE
    return gates


def check_consumable_shares(mode: str, gates: dict[str, bool]) -> str:
    """NVIDIA's checks of --consumable-shares, in its order: the gate first, then the value."""
    mode = str(mode).strip()
    if mode != "disabled" and not gates.get("ConsumableShares", False):
        raise FeatureGateError("--consumable-shares requires feature gate ConsumableShares to be enabled")
    if mode not in CONSUMABLE_SHARES_MODES and not (mode.isdigit() and int(mode) > 0):
        raise FeatureGateError(f"invalid value for --consumable-shares: {mode!r} "
                               "(must be 'disabled', 'memory', 'unlimited', or a positive integer)")
    return mode
