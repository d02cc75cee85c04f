// The kit's sim path in real WebAssembly CPython: Pyodide (npm `pyodide`) under Node.js, no browser.
// Usage: node run_sim.mjs <pyodide dir> [--stdlib ZIP] <wheel or sdist>... ; prints the placements, the number
// of modules compiled from source (site-packages, the standard library), how many catalog files came from a
// JSON twin, then "OK <seconds>".
// Wheels are unpacked into site-packages; an sdist (PyYAML: no wasm wheel on PyPI) gives its pure-Python
// lib/yaml. No network: every file comes from the command line.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { pathToFileURL } from "node:url";

const [pyodideDir, ...args] = process.argv.slice(2);
// --stdlib ZIP: the standard library to load instead of the distribution's (the site's, with bytecode)
const stdlib = args[0] === "--stdlib" ? args[1] : undefined;
const files = stdlib ? args.slice(2) : args;
const started = Date.now();
const { loadPyodide } = await import(pathToFileURL(`${pyodideDir}/pyodide.mjs`).href);
const py = await loadPyodide({ indexURL: `${pyodideDir}/`, ...(stdlib ? { stdLibURL: stdlib } : {}) });
py.FS.mkdirTree("/tmp/dist");
for (const f of files) py.FS.writeFile(`/tmp/dist/${basename(f)}`, readFileSync(f));
await py.runPythonAsync(`
import pathlib, site, sys, tarfile, zipfile
target = pathlib.Path(site.getsitepackages()[0])
for f in sorted(pathlib.Path("/tmp/dist").iterdir()):
    if f.suffix == ".whl":
        zipfile.ZipFile(f).extractall(target)
    else:  # an sdist with a pure-Python package under lib/ (PyYAML)
        with tarfile.open(f) as tar:
            for m in tar.getmembers():
                parts = pathlib.PurePosixPath(m.name).parts
                if len(parts) > 2 and parts[1] == "lib" and m.isfile():
                    out = target.joinpath(*parts[2:])
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(tar.extractfile(m).read())
`);
// count the modules of site-packages that the sim path compiles from source (0 when the wheels carry
// bytecode of this interpreter, as the site's do: notebooks/wheel_bytecode.py)
py.runPython(`
import builtins, os, site, sys
_site_packages, _compile = site.getsitepackages()[0], builtins.compile
_stdlib = next(p for p in sys.path if p.endswith(".zip"))
COMPILED, COMPILED_STDLIB = [], []
def _counting_compile(source, filename, *args, **kwargs):
    if str(filename).startswith(_site_packages):
        COMPILED.append(str(filename)[len(_site_packages) + 1:])
    elif str(filename).startswith(_stdlib + "/"):
        COMPILED_STDLIB.append(str(filename)[len(_stdlib) + 1:])
    return _compile(source, filename, *args, **kwargs)
builtins.compile = _counting_compile
# and whether the GPU catalog's files came from their JSON twins (the site ships them) or were parsed as YAML
import fake_gpus.catalog.loader as _catalog
_from_twin, TWINS = _catalog._from_twin, []
def _noting_twin(path, data):
    found, doc = _from_twin(path, data)
    TWINS.append(found)
    return found, doc
_catalog._from_twin = _noting_twin
`);
const out = await py.runPythonAsync(`
import sys
from labkit.cluster import connect
from labkit.course import backend_table
cluster = connect("sim", "workshop", progress=False)
cluster.apply("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-a100, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel: {expression: 'device.attributes["gpu.nvidia.com"].productName.matches("A100")'}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  containers: [{name: main, image: busybox}]
  resourceClaims: [{name: gpu, resourceClaimName: one-a100}]
""")
assert cluster.wait(), "the pod did not start"
rows = [f"{r}" for r in cluster.placements().rows]
native = sorted(m for m in ("cel_expr_python", "re2", "kubernetes", "grpc", "pydantic") if m in sys.modules
                and not getattr(sys.modules[m], "__name__", "").startswith("labkit"))
table = [" | ".join(r) for r in backend_table()]
builtins.compile = _compile
# what a tab would show under a cell: tqdm's first bar (no threads in a tab) and matplotlib's font message
import contextlib, io, logging
from tqdm.auto import tqdm
stderr = io.StringIO()
with contextlib.redirect_stderr(stderr):
    tqdm(total=1, disable=True).close()
    logging.getLogger("matplotlib.font_manager").warning("Matplotlib is building the font cache; this may take a moment.")
"\\n".join([sys.platform, f"native modules loaded: {native}", *rows, *table,
           f"compiled from source in site-packages: {len(COMPILED)} {sorted(COMPILED)[:5]}",
           f"compiled from source in the standard library: {len(COMPILED_STDLIB)} {sorted(COMPILED_STDLIB)[:5]}",
           f"catalog files read from a JSON twin: {sum(TWINS)} of {len(TWINS)}",
           f"on stderr: {stderr.getvalue()!r}"])
`);
console.log(out);
console.log(`OK ${((Date.now() - started) / 1000).toFixed(1)}`);
