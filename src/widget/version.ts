/**
 * The widget module's name and version. Python's ReportWidget sends the same pair
 * (`_model_module`, `_model_module_version`), read from gpusight._version; a spec holds the two
 * and package.json together.
 */
// Webpack (the labextension build) and vitest both resolve a JSON require; tsc's rootDir would not
// let an import of ../../package.json through.
declare const require: (id: string) => { name: string; version: string };

const pkg = require('../../package.json');

export const MODULE_NAME: string = pkg.name;
export const MODULE_VERSION: string = pkg.version;
