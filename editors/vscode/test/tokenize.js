// Tokenises .reward files with VS Code's own TextMate engine (vscode-textmate on vscode-oniguruma) and the
// grammar beside this folder. Prints JSON: {file: [[line, startChar, endChar, [scopes...]], ...]} on stdout.
// Used by tests/test_textmate.py:  node tokenize.js FILE...
"use strict";
const fs = require("fs");
const path = require("path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const grammarPath = path.join(__dirname, "..", "syntaxes", "reward.tmLanguage.json");
const wasm = fs.readFileSync(path.join(__dirname, "node_modules", "vscode-oniguruma", "release", "onig.wasm"));

async function main() {
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (sources) => new oniguruma.OnigScanner(sources),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => {
      if (scopeName !== "source.reward") return null;
      return vsctm.parseRawGrammar(fs.readFileSync(grammarPath, "utf8"), grammarPath);
    },
  });
  const grammar = await registry.loadGrammar("source.reward");
  const out = {};
  for (const file of process.argv.slice(2)) {
    const lines = fs.readFileSync(file, "utf8").split("\n");
    let state = vsctm.INITIAL;
    const tokens = [];
    lines.forEach((line, i) => {
      const r = grammar.tokenizeLine(line, state);
      for (const t of r.tokens) {
        tokens.push([i, t.startIndex, Math.min(t.endIndex, line.length), t.scopes]);
      }
      state = r.ruleStack;
    });
    out[file] = tokens;
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
