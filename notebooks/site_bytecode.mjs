// node notebooks/site_bytecode.mjs PYODIDE_DIR ARG...
// Runs notebooks/wheel_bytecode.py ARG... inside the Pyodide of PYODIDE_DIR (a distribution's folder: the
// site's own core), so that the wheels it writes carry bytecode of exactly the interpreter that will import
// them. Each ARG that is an absolute path of an existing file or folder here is mounted into Pyodide's file
// system (Node's file system, as it is) and passed under its path there. notebooks/site.py runs it.
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [dir, ...args] = process.argv.slice(2);
if (!dir || !existsSync(resolve(dir, "pyodide.mjs"))) {
  console.error(`usage: node site_bytecode.mjs PYODIDE_DIR ARG... (no pyodide.mjs in ${dir})`);
  process.exit(2);
}
const { loadPyodide } = await import(pathToFileURL(resolve(dir, "pyodide.mjs")).href);
const py = await loadPyodide({ indexURL: resolve(dir) + "/" });
const mounts = new Map();  // host folder -> its folder in Pyodide
const mount = (host) => {
  if (!mounts.has(host)) {
    const at = `/mnt/host${mounts.size}`;
    py.FS.mkdirTree(at);
    py.FS.mount(py.FS.filesystems.NODEFS, { root: host }, at);
    mounts.set(host, at);
  }
  return mounts.get(host);
};
const mapped = args.map((arg) => {
  if (!isAbsolute(arg) || !existsSync(arg)) return arg;
  const host = resolve(arg);
  return statSync(host).isDirectory() ? mount(host) : `${mount(dirname(host))}/${host.slice(dirname(host).length + 1)}`;
});
const here = dirname(fileURLToPath(import.meta.url));
py.setStdout({ batched: (line) => console.log(line) });
py.setStderr({ batched: (line) => console.error(line) });
py.globals.set("ARGV", py.toPy(["wheel_bytecode.py", ...mapped]));
py.runPython("import sys; sys.argv = list(ARGV); del ARGV");
try {
  py.runPython(readFileSync(resolve(here, "wheel_bytecode.py"), "utf8"));  // as __main__ (Pyodide's globals)
} catch (err) {
  if (!(err instanceof py.ffi.PythonError) || !/SystemExit: 0/.test(err.message)) { console.error(err.message); process.exit(1); }
}
