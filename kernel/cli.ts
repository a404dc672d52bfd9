/**
 * The `tessera` entry point (`npm start` runs `node --import tsx kernel/cli.ts serve`; bin/tessera.js runs
 * the bundle built from this file, dist/cli.js). The program lives in kernel/cli/.
 */
import { main } from './cli/index.js';

await main(process.argv);
