// Build with esbuild: the extension (Node, CommonJS, `vscode` external) and the webview script
// (browser IIFE). `--tests` also bundles test/**/*.test.ts into out/test/, with `vscode` resolved to
// the stub in stubs/vscode.ts. `--production` minifies and drops source maps.
import * as esbuild from 'esbuild';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const args = new Set(process.argv.slice(2));
const production = args.has('--production');
const tests = args.has('--tests');

const common = { bundle: true, logLevel: 'warning', sourcemap: production ? false : 'linked', minify: production };

const builds = [
  esbuild.build({ ...common, entryPoints: ['src/extension.ts'], outfile: 'out/extension.js', platform: 'node',
    format: 'cjs', target: 'node18', external: ['vscode'] }),
  esbuild.build({ ...common, entryPoints: ['src/webview/main.ts'], outfile: 'out/webview.js', platform: 'browser',
    format: 'iife', target: 'es2020' }),
];
if (tests) {
  rmSync('out/test', { recursive: true, force: true });
  const entryPoints = [];
  for (const dir of readdirSync('test', { withFileTypes: true })) {
    if (!dir.isDirectory()) continue;
    for (const f of readdirSync(join('test', dir.name))) {
      if (f.endsWith('.test.ts')) entryPoints.push(join('test', dir.name, f));
    }
  }
  builds.push(esbuild.build({ ...common, sourcemap: 'inline', minify: false, entryPoints, outdir: 'out/test',
    outbase: 'test', platform: 'node', format: 'cjs', target: 'node20', external: ['playwright-core'],
    alias: { vscode: './stubs/vscode.ts' } }));
}
await Promise.all(builds);
