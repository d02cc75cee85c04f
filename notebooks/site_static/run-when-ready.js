// DRA LabKit course site (notebooks/site.py): a cell run before the notebook's kernel is up runs once it is
// up, as with a server kernel. JupyterLab's run commands clear a cell whose session has no kernel yet, and
// in a browser tab Python (Pyodide) takes seconds to start: a Run All clicked early ran nothing. Each run
// command of the notebook is wrapped to wait for the session (its `ready`) and then for its kernel to be
// connected and idle or busy. The lab is reached as `window.jupyterapp` (the site's `exposeAppInBrowser`).
(function () {
  'use strict';
  const RUN = ['notebook:run-cell', 'notebook:run-cell-and-select-next', 'notebook:run-cell-and-insert-below',
    'notebook:run-all-cells', 'notebook:run-all-above', 'notebook:run-all-below', 'notebook:restart-run-all'];

  function kernelUp(ctx) {
    const kernel = ctx.session && ctx.session.kernel;
    return !!kernel && kernel.connectionStatus === 'connected' && (kernel.status === 'idle' || kernel.status === 'busy');
  }

  function whenKernelUp(ctx) {
    return new Promise(resolve => {
      const signals = [ctx.statusChanged, ctx.connectionStatusChanged, ctx.kernelChanged];
      const check = () => {
        if (kernelUp(ctx) || ctx.hasNoKernel || ctx.isDisposed) {
          signals.forEach(s => s.disconnect(check));
          resolve();
        }
      };
      signals.forEach(s => s.connect(check));
      check();
    });
  }

  async function runWhenUp(ctx, run, args) {
    await ctx.ready;
    if (!ctx.hasNoKernel) {
      await whenKernelUp(ctx);
    }
    return run(args);
  }

  function wrap(app, id) {
    const command = app.commands._commands && app.commands._commands.get(id);
    if (!command || command.labkitWhenReady) {
      return;
    }
    const run = command.execute;
    command.execute = args => {
      const widget = app.shell.currentWidget;
      const ctx = widget && widget.sessionContext;
      if (!ctx || (ctx.isReady && (ctx.hasNoKernel || kernelUp(ctx)))) {
        return run(args);
      }
      return runWhenUp(ctx, run, args);
    };
    command.labkitWhenReady = true;
  }

  function attach(app) {
    RUN.forEach(id => wrap(app, id));
    app.commands.commandChanged.connect((_, change) => {
      if (change.type === 'added' && RUN.includes(change.id)) {
        wrap(app, change.id);
      }
    });
  }

  const started = Date.now();
  (function waitForApp() {
    if (window.jupyterapp) {
      attach(window.jupyterapp);
    } else if (Date.now() - started < 600000) {
      setTimeout(waitForApp, 20);
    }
  })();
})();
