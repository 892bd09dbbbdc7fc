// The command line the bench scripts share:
//   node bench/X.mjs SLUICE_BINARY MODEL_DIR [own options] [-- flags passed to sluice]
// Exits with the usage line when the binary or the model is missing.
export function benchArgs(usage) {
  const [bin, model, ...rest] = process.argv.slice(2);
  if (!bin || !model) {
    console.error(usage);
    process.exit(2);
  }
  const dash = rest.indexOf('--');
  const own = dash < 0 ? rest : rest.slice(0, dash);
  const passed = dash < 0 ? [] : rest.slice(dash + 1);
  const opt = (name, def) => {
    const i = own.indexOf(name);
    return i < 0 ? def : own[i + 1];
  };
  const has = (name) => own.includes(name);
  return { bin, model, passed, opt, has };
}
