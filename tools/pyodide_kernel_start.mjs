// node tools/pyodide_kernel_start.mjs old|new <site>/static/pyodide: the kernel-start package loads as the site did before
// (the core, the kernel's packages one by one, the kit with matplotlib) and does now (one loadPyodide with all,
// no matplotlib), then the sim path's imports and connect("sim"). A measurement for docs/browser-course.md.
import { existsSync } from "node:fs";
import { pathToFileURL } from "node:url";
const [mode, dir] = process.argv.slice(2);
// the site's standard library with bytecode (notebooks/site.py ships it instead of python_stdlib.zip)
const stdlib = existsSync(`${dir}/python_stdlib_pyc.zip`) ? { stdLibURL: `${dir}/python_stdlib_pyc.zip` } : {};
const t0 = performance.now();
const lap = () => ((performance.now() - t0) / 1000).toFixed(1);
const { loadPyodide } = await import(pathToFileURL(`${dir}/pyodide.mjs`).href);
const KERNEL = ["micropip", "ssl", "sqlite3", "comm", "ipython"];
let py;
if (mode === "old") {  // the kernel's one-by-one loads, then the first cell's `import labkit` (matplotlib with it)
  py = await loadPyodide({ indexURL: `${dir}/`, ...stdlib });
  const core = lap();
  for (const p of KERNEL) await py.loadPackage([p], { messageCallback: () => {} });
  const kernel = lap();
  await py.loadPackage(["dra-labkit"], { messageCallback: () => {} });
  console.log(`core ${core} kernel ${kernel} kit ${lap()}`);
} else {  // one parallel load while Pyodide starts; matplotlib not
  py = await loadPyodide({ indexURL: `${dir}/`, ...stdlib, packages: [...KERNEL, "piplite", "ipykernel", "pyodide_kernel", "dra-labkit"] });
  console.log(`core+kernel+kit ${lap()}`);
}
const before = lap();
await py.runPythonAsync(`
import IPython
from labkit.cluster import connect
from labkit.course import checks
from labkit.course.show import table
c = connect("sim", "workshop", progress=False)
`);
console.log(`IMPORTS+CONNECT ${(lap() - before).toFixed(1)} TOTAL ${lap()} mpl=${py.runPython("import sys; 'matplotlib' in sys.modules")}`);
