// What to do about a start-up failure whose cause Node's own lines name
// exactly, said beside those lines. Pure: the output lines in, a sentence
// or null out (readiness.js adds it to the explanation of a program, or of
// workers, that died before answering).
//
// CommonJS in the workspace: the workspace's package.json says
// "type": "module" (the starters are ES modules), so a .js file that uses
// require, module.exports, exports or __dirname stops at its first use with
// "require is not defined in ES module scope". Node's next line mentions
// .cjs, but not that the learner's file is the one to rename, nor the other
// way out (import).

const COMMONJS_ONLY = /\b(require|module|exports|__dirname|__filename) is not defined in ES module scope/;
const PACKAGE_JSON = /'([^']*package\.json)' contains "type": "module"/;

/**
 * @param {string[]} lines the program's output (stdout and stderr, in order)
 * @returns {string | null} advice to add to the failure's explanation
 */
export function startFailureAdvice(lines) {
  const text = lines.join('\n');
  const commonjs = COMMONJS_ONLY.exec(text);
  if (!commonjs) return null;
  const name = commonjs[1];
  const use = name === 'require' ? "replace require('x') with import x from 'x'" : `use import and import.meta.dirname instead of ${name}`;
  const pkg = PACKAGE_JSON.exec(text)?.[1];
  if (pkg) {
    return (
      `Your file is CommonJS (it uses ${name}), but Node reads a .js file as an ES module here, because ${pkg} says "type": "module". ` +
      `Either give it the .cjs extension (server.cjs) and verify that file: a .cjs file is always CommonJS; or ${use}, as the starters do.`
    );
  }
  // An .mjs file, or a file Node took for an ES module because it uses import: no package.json to blame.
  return `${name} does not exist in an ES module, which your file is (an .mjs file, or one that uses import). ${use[0].toUpperCase()}${use.slice(1)}; or make the whole file CommonJS (.cjs, with require everywhere).`;
}
